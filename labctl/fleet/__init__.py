"""The fleet face: lab hosts prepared and swept in parallel by the playbooks in ``playbooks/``, driven
through ansible-runner's Python API, with per-host results and one merged result store.

    run = prepare("hosts.yml")                       # playbooks/lab-host.yml
    run = sweep("domains/quick.yaml", "hosts.yml", "fleet.db", on_event=print)   # playbooks/sweep.yml
    for host in run.hosts: host.status, host.reason, host.stats, host.jsonl
    run.merged                                       # one imported run per good host, env.host = its name
"""

from labctl.fleet.events import HostEvent, HostStats
from labctl.fleet.inventory import inventory_hosts
from labctl.fleet.merge import Merged, merge
from labctl.fleet.run import FleetRun, HostResult, playbooks_dir, prepare, sweep

__all__ = ["FleetRun", "HostEvent", "HostResult", "HostStats", "Merged", "inventory_hosts", "merge",
           "playbooks_dir", "prepare", "sweep"]
