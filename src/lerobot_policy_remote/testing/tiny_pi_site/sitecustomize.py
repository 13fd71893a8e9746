"""Put this folder on PYTHONPATH to make a subprocess build tiny pi0 / pi0.5 models (test kit only).

See `lerobot_policy_remote.testing.tiny_pi`: the hook is installed once lerobot's pi modules can be imported.
"""

from lerobot_policy_remote.testing.tiny_pi import install

install()
