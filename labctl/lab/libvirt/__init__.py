"""libvirt guests: lifecycle (up/down/status), libvirt-python, domain XML, negotiation report, the workload appliance."""
