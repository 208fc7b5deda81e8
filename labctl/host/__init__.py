"""This host: facts for doctor, cpusets, steadiness, the environment fingerprint, thread readers and the monitor."""
