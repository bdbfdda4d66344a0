"""The grader's agent inside a learner's kernel: calls what the grader asks for, answers with plain data.

The grader sends this file's source (with ``wire.py``'s) into the kernel once the
learner's notebook has run, then one request per probe. A request names a function of
the notebook and the arguments the grader chose, or a *task* (grader code that must run
beside the learner's functions). The answer is displayed under a MIME type of its own
and carries the grader's token; it is plain data only (see ``wire.py``), and the grader
decides what it means. Nothing here can change a verdict: a kernel that lies can only
hand over wrong answers.

Standard library only; ``encode``, ``decode`` and ``NotPlainData`` come from ``wire.py``,
which is sent along.
"""

import __future__
import json
import traceback

try:  # imported as a module (tests); in the kernel wire.py's names are already here
    from .wire import NotPlainData, decode, encode
except ImportError:
    pass

MIME = "application/vnd.kafka-lab.reply+json"


def _in_a_cell(filename):
    """A notebook cell's code (IPython names cells after the kernel, never after a library file)."""
    return "ipykernel_" in filename or filename.startswith("<ipython-input")


def _failure(exc):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _in_a_cell(f.filename)]
    return {"ok": False, "type": type(exc).__name__, "message": str(exc)[:500],
            "line": frames[-1].lineno if frames else None}


def handle(request, user):
    """Answer one request against the notebook's globals ``user``."""
    op = request.get("op")
    try:
        if op == "get":
            name = request["name"]
            if name not in user:
                return {"ok": False, "type": "NameError", "missing": True, "message": f"`{name}` is not defined"}
            value = user[name]
            if callable(value):
                return {"ok": True, "callable": True}
            return {"ok": True, "callable": False, "value": encode(value)}
        if op == "call":
            fn = user[request["name"]]
            return {"ok": True, "value": encode(fn(*decode(request["args"]), **decode(request["kwargs"])))}
        if op == "many":
            fn = user[request["name"]]
            values = []
            for index, (args, kwargs) in enumerate(decode(request["calls"])):
                try:
                    values.append(encode(fn(*args, **kwargs)))
                except BaseException as exc:  # noqa: BLE001 - reported with the call it came from
                    failed = _failure(exc)
                    failed["index"] = index
                    return failed
            return {"ok": True, "values": values}
        if op == "task":
            scope = {}
            # tasks are checks' module-level functions: their annotations stay unevaluated, as there
            exec(compile(request["source"], "<labkit-task>", "exec", flags=__future__.annotations.compiler_flag,
                         dont_inherit=True), scope)
            return {"ok": True, "value": encode(scope[request["name"]](user, *decode(request["args"])))}
        return {"ok": False, "type": "ValueError", "message": f"unknown request {op!r}"}
    except NotPlainData as exc:
        return {"ok": False, "type": "NotPlainData", "message": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - SystemExit from learner code must not end the probe either
        return _failure(exc)


def answer(token, request_text, user):
    """Handle one request and display the answer where the grader reads it."""
    from IPython.display import display

    reply = handle(json.loads(request_text), user)
    reply["token"] = token
    display({MIME: reply}, raw=True)
