# JupyterHub's configuration for a Kafka Lab class: `labkit classroom serve` (make classroom) runs
# `jupyterhub -f` on this file with LABKIT_CLASSROOM_CONFIG naming the class's classroom.toml.
# Everything is set by labkit.app.hub.configure (login, learners' servers, idle culling, the class poll).
from labkit.app.classroom import load_config
from labkit.app.hub import configure

configure(get_config(), load_config())  # noqa: F821 - get_config is JupyterHub's, defined when it loads this file
