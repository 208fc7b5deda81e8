"""This host: facts for doctor, cpusets, steadiness, the environment fingerprint, thread readers, the monitor, labctl's directories."""
