"""tune refuses tcp workloads in one line (its search objective is a forwarding rate)."""
import pytest

from labctl import api
from labctl.errors import UserError


@pytest.mark.parametrize("profile", ["domains/tcp-multiqueue.yaml", "domains/tcp-rr.yaml"])
def test_tune_refuses_tcp_profile(profile, tmp_path):
    loaded = api.load_profile(profile)
    assert loaded.profile.workload.kind in ("tcp_stream", "tcp_rr")
    with pytest.raises(UserError) as e:
        api.tune(loaded, budget=2, db=tmp_path / "x.db")
    msg = str(e.value)
    assert "workload.kind" in msg and "allowed: forward" in msg and "\n" not in msg
