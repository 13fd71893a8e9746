"""Put this folder on PYTHONPATH to make a subprocess build tiny pi0 / pi0.5 models (test kit only).

See `lerobot_policy_remote.testing.tiny_pi`. Installing the hook imports lerobot before lerobot imports this
package as a plugin, so the package's lerobot hooks (`--inference.type=remote`, `sim_arm`) are registered here.
"""

import lerobot_policy_remote
from lerobot_policy_remote.testing.tiny_pi import install

# It installs a hook and starts nothing (no thread, no session): a warm-start zygote may run it for its children.
WARM_START_SAFE = True

install()
lerobot_policy_remote.register_lerobot_plugins()
