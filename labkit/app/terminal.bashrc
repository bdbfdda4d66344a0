# The shell of `labkit lab`'s terminals (File -> New -> Terminal): a login shell's set-up, then the lab's
# Python environment first on PATH, so `labkit grade ...` works there (issue 26: "labkit: command not
# found"). A login shell alone would not do: /etc/profile sets PATH afresh, dropping the environment's bin.
[ -r /etc/profile ] && . /etc/profile
for profile in ~/.bash_profile ~/.bash_login ~/.profile; do
  if [ -r "$profile" ]; then . "$profile"; break; fi
done
if [ -n "$LABKIT_LAB_BIN" ]; then
  if [ -r "$LABKIT_LAB_BIN/activate" ]; then
    . "$LABKIT_LAB_BIN/activate"
  else
    export PATH="$LABKIT_LAB_BIN:$PATH"
  fi
fi
