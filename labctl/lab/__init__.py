"""Labs: the plan derived once from a profile, the ledger of created resources and its kinds, hugepages, pins; embedded/ and libvirt/."""
