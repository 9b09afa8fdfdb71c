"""Hardware facts collected on this very machine."""

import json
import os
import resource
from pathlib import Path

import pytest

from agents.observe.facts import collect_facts
from agents.observe.procfs import selected_choice
from agents.observe.storage import read_mounts


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("storage")
    return collect_facts({"root": Path("/"), "later": base / "not" / "created"})


def test_facts_have_every_section_and_survive_json(facts: dict) -> None:
    assert set(facts) == {
        "cpu",
        "memory",
        "disks",
        "storage",
        "os",
        "sysctls",
        "limits",
        "collected_at",
    }
    assert json.loads(json.dumps(facts)) == facts


def test_cpu_and_memory_describe_this_host(facts: dict) -> None:
    assert facts["cpu"]["threads"] == os.cpu_count()
    assert facts["cpu"]["cores"] >= 1
    assert facts["cpu"]["sockets"] >= 1
    assert facts["cpu"]["model"]
    assert facts["memory"]["total_bytes"] > 0
    assert facts["memory"]["hugepage_size_bytes"] > 0


def test_disk_holding_the_root_filesystem_is_listed(facts: dict) -> None:
    root = facts["storage"]["root"]
    if root["block_device"] is None:
        pytest.skip("the root filesystem has no block device here")
    disk_names = {disk["name"] for disk in facts["disks"]}
    assert root["block_device"] in disk_names
    assert set(root["disks"]) <= disk_names
    assert not any(name.startswith(("loop", "ram", "zram")) for name in disk_names)
    root_disk = next(disk for disk in facts["disks"] if disk["name"] == root["block_device"])
    assert root_disk["size_bytes"] > 0
    assert isinstance(root_disk["rotational"], bool)
    assert root_disk["scheduler"] is None or "[" not in root_disk["scheduler"]


def test_storage_target_not_created_yet_resolves_to_its_mount(facts: dict) -> None:
    later = facts["storage"]["later"]
    existing = Path(later["existing_path"])
    assert not Path(later["path"]).exists()
    assert existing == Path(later["path"]).parent.parent
    assert existing.is_relative_to(later["mount_point"])
    assert later["filesystem"] in {mount.fs_type for mount in read_mounts()}
    assert later["mount_options"].startswith(("rw", "ro"))
    assert 0 < later["free_bytes"] <= later["total_bytes"]


def test_tmpfs_target_has_no_block_device() -> None:
    shm = collect_facts({"shm": Path("/dev/shm")})["storage"]["shm"]
    if shm["filesystem"] != "tmpfs":
        pytest.skip("/dev/shm is not a tmpfs here")
    assert shm["block_device"] is None
    assert shm["disks"] == []


def test_sysctls_and_limits_are_read(facts: dict) -> None:
    sysctls = facts["sysctls"]
    assert sysctls["vm.swappiness"] == int(Path("/proc/sys/vm/swappiness").read_text())
    assert isinstance(sysctls["vm.dirty_ratio"], int)
    assert sysctls["transparent_hugepage.enabled"] in {"always", "madvise", "never", None}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert facts["limits"] == {"nofile_soft": soft, "nofile_hard": hard}


def test_os_names_kernel_and_distribution(facts: dict) -> None:
    assert facts["os"]["kernel_release"] == os.uname().release
    assert facts["os"]["architecture"] == os.uname().machine
    assert facts["os"]["boot_time"] < facts["collected_at"]


def test_selected_choice_picks_the_bracketed_word() -> None:
    assert selected_choice("always [madvise] never") == "madvise"
    assert selected_choice("none") == "none"
    assert selected_choice(None) is None


def test_mountinfo_escapes_and_super_options_are_decoded(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "36 25 8:1 / /mnt/fast\\040disk rw,noatime shared:1 - xfs /dev/sda1 rw,attr2,noquota\n"
    )
    (mount,) = read_mounts(str(mountinfo))
    assert mount.mount_point == "/mnt/fast disk"
    assert mount.fs_type == "xfs"
    assert mount.source == "/dev/sda1"
    assert mount.options == "rw,noatime,attr2,noquota"
    assert mount.device_number == "8:1"
