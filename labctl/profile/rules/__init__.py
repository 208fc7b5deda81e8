"""Every constraint on a lab profile, in one place, each with its reason and its source.

A rule looks at a validated ``Profile`` (types already checked by ``labctl.profile.schema``) and the host's
online CPUs, and yields ``Problem``s: errors stop the profile, warnings are printed and recorded.

The rules live in modules by what they constrain; ``RULES`` (:mod:`registry`) holds them in the order they are
declared, which is the order of a profile's problems:

* :mod:`basics`: ``name``, ``uri``, ``guest-size``;
* :mod:`nics`: ``nic-count``, ``queues``, ``ring-size``, ``tx-ring-backend``, ``embedded-backend``;
* :mod:`pinning`: ``pinning``, ``shared-poller``;
* :mod:`workload`: ``workload``, ``rate``, ``pacing``;
* :mod:`setups`: ``vswitch``, ``nic-model``, ``topology``, ``guest-setup``, ``tcp-workload``;
* :mod:`image`: ``guest-image``;
* :mod:`builds`: ``builds``, ``build`` (and ``binary_problem``, ``probe_output``, ``vswitch_kind_of``, which
  ``labctl.lab.builds`` uses again at run time);
* :mod:`recipes`: ``recipes``, ``recipe-builds`` (builds made from git revisions: ``labctl.lab.recipes``);
* :mod:`runs`: ``order``, ``repeat``;
* :mod:`check`: ``check_profile``, every rule and then every configuration of the sweep.
"""

from __future__ import annotations

# imported in this order, the rules register in it (the order of a profile's problems)
from labctl.profile.rules import basics, nics, pinning, workload, setups, image, builds, recipes, runs  # noqa: F401, I001
from labctl.profile.rules.basics import NAME_PATTERN, URI_PATTERN
from labctl.profile.rules.builds import (DPDK_VERSION_ARGS, ENV_NAME, OVS_VERSION, PROBE_TIMEOUT_S, RTE_VERSION,
                                         binary_problem, probe_output, vswitch_kind_of)
from labctl.profile.rules.check import MAX_SWEEP_CONFIGS, check_profile
from labctl.profile.rules.registry import RULES, Rule, rule
from labctl.profile.rules.setups import OVS_KNOBS, TCP_KINDS

__all__ = ["DPDK_VERSION_ARGS", "ENV_NAME", "MAX_SWEEP_CONFIGS", "NAME_PATTERN", "OVS_KNOBS", "OVS_VERSION",
           "PROBE_TIMEOUT_S", "RTE_VERSION", "RULES", "Rule", "TCP_KINDS", "URI_PATTERN", "binary_problem",
           "check_profile", "probe_output", "rule", "vswitch_kind_of"]
