"""Network namespaces for tests: hosts with their own interfaces, joined by veth pairs.

`Network` creates named namespaces (`bl<tag><n>`) and veth pairs between them
(or between one of them and the root namespace), each pair on its own /30 of
one 10.213.X.0/24 drawn at random and checked to be unused on this machine.
Nothing leaves the machine: the namespaces have no default route (they reach
only the other end of their own links), and the root namespace gets a
blackhole route for the whole /24, so a reply to an address whose link is down
is dropped instead of following the root namespace's default route out of the
host's real interface.

`Network.close` kills every process still inside a namespace it made, then
deletes the veths, the namespaces and the blackhole route; use it in a
`finally` (or the `network` context manager) so a failing test cleans up too.
"""

import ipaddress
import logging
import os
import random
import secrets
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

NETNS_DIR = Path("/run/netns")
# 10.213.0.0/16 is private; each Network takes one /24 of it.
TEST_RANGE = ipaddress.IPv4Network("10.213.0.0/16")
ROOT: None = None  # the root namespace, as a link's end


@dataclass(frozen=True)
class End:
    """One end of a veth pair: its device, its namespace (None: the root one) and address."""

    device: str
    namespace: str | None
    address: str

    def ip(self, *args: str) -> list[str]:
        """An `ip` command run in this end's namespace."""
        return ["ip", *(["-n", self.namespace] if self.namespace else []), *args]


@dataclass(frozen=True)
class Link:
    """A veth pair on its own /30."""

    left: End
    right: End

    def end_in(self, namespace: str | None) -> End:
        for end in (self.left, self.right):
            if end.namespace == namespace:
                return end
        raise ValueError(f"link {self.left.device} has no end in {namespace!r}")


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _used_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks the root namespace has addresses or routes in."""
    used = []
    for word in _run(["ip", "-4", "-o", "addr"]).split() + _run(["ip", "-4", "route"]).split():
        if "." in word and word[0].isdigit():
            try:
                used.append(ipaddress.IPv4Network(word, strict=False))
            except ValueError:
                continue
    return used


def _free_subnet() -> ipaddress.IPv4Network:
    used = _used_networks()
    subnets = list(TEST_RANGE.subnets(new_prefix=24))[1:-1]
    for subnet in random.sample(subnets, len(subnets)):
        if not any(subnet.overlaps(other) for other in used):
            return subnet
    raise RuntimeError(f"no free /24 left in {TEST_RANGE}")


class Network:
    """Namespaces and veth pairs of one test; `close` removes all of it."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)
        self.subnet = _free_subnet()
        self.namespaces: list[str] = []
        self.links: list[Link] = []
        self._pairs = self.subnet.subnets(new_prefix=30)
        _run(["ip", "route", "add", "blackhole", str(self.subnet)])
        self._blackhole = True

    def namespace(self) -> str:
        """A new namespace with its loopback up."""
        name = f"bl{self.tag}{len(self.namespaces)}"
        _run(["ip", "netns", "add", name])
        self.namespaces.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])
        return name

    def link(self, left: str | None, right: str | None) -> Link:
        """A veth pair between two namespaces (None: the root namespace), addresses up."""
        pair = next(self._pairs)
        first, second = (str(host) for host in pair.hosts())
        index = len(self.links)
        link = Link(
            End(f"bl{self.tag}{index}l", left, first), End(f"bl{self.tag}{index}r", right, second)
        )
        _run(["ip", "link", "add", link.left.device, "type", "veth", "peer", link.right.device])
        self.links.append(link)
        for end in (link.left, link.right):
            if end.namespace:
                _run(["ip", "link", "set", end.device, "netns", end.namespace])
            _run(end.ip("addr", "add", f"{end.address}/30", "dev", end.device))
            _run(end.ip("link", "set", end.device, "up"))
        return link

    def down(self, end: End) -> None:
        """Take one end down: its peer loses carrier and both sides' packets are dropped."""
        _run(end.ip("link", "set", end.device, "down"))

    def up(self, end: End) -> None:
        """Bring an end back up (its /30 route comes back with it)."""
        _run(end.ip("link", "set", end.device, "up"))
        # The connected route returns with the address when the device is up again.
        routes = _run(end.ip("-4", "route", "show", "dev", end.device))
        if not routes.strip():
            raise RuntimeError(f"{end.device} is up but has no route")

    @staticmethod
    def exec_argv(namespace: str) -> list[str]:
        """The prefix that runs a command inside `namespace`."""
        return ["ip", "netns", "exec", namespace]

    def pids_inside(self) -> list[int]:
        """Processes whose network namespace is one of ours."""
        inodes = {os.stat(NETNS_DIR / name).st_ino for name in self.namespaces}
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                inode = os.stat(entry / "ns" / "net").st_ino
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            if inode in inodes:
                pids.append(int(entry.name))
        return pids

    def close(self) -> None:
        """Kill what still runs inside, delete the veths, namespaces and the blackhole route."""
        for pid in self.pids_inside():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            logger.warning("killed pid %s left inside the test's namespaces", pid)
        for link in self.links:
            # Deleting one end deletes the pair; the end may be gone with its namespace.
            subprocess.run(link.left.ip("link", "del", link.left.device), capture_output=True)
        for name in self.namespaces:
            _run(["ip", "netns", "del", name])
        if self._blackhole:
            _run(["ip", "route", "del", "blackhole", str(self.subnet)])
            self._blackhole = False


@contextmanager
def network() -> Iterator[Network]:
    """A `Network` that is closed on exit, whatever happened."""
    net = Network()
    try:
        yield net
    finally:
        net.close()
