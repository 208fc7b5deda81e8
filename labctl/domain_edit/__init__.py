"""``labctl apply``: the advice (or a tuned profile, or knobs) applied to the user's own libvirt domains.

``xmlio`` (safe parsing, in-place text edits), ``changes`` (the change set), ``nics``, ``cputune``, ``memory``
(what is changed), ``edit`` (``apply_changes``), ``diffs``, ``emit`` (the advice as libvirt XML, Nova, KubeVirt
and Ansible forms), ``face`` (the api-level functions). Live domains: ``live``, ``originals``, ``verify``,
``hook``.
"""
