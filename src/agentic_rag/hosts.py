"""Host names and allow-list entries, read without the network: the rules the settings check
their allow-lists with (config.py) and the SSRF guard applies (security/ssrf.py)."""

import ipaddress
import re

type IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_LABEL = re.compile(r"[a-z0-9_-]{1,63}")


def is_host_name(host: str) -> bool:
    """A lowercase DNS name: labels of letters, digits, `-` and `_`, joined by dots."""
    return 0 < len(host) <= 253 and all(_LABEL.fullmatch(label) for label in host.split("."))


def allow_list_entry(entry: str) -> IPNetwork | str:
    """One entry of an allow-list of hosts: an address or a network, else a host name
    (lowercase, without its final dot); a ValueError that names it if it is neither."""
    item = entry.strip().lower().rstrip(".")
    try:
        return ipaddress.ip_network(item, strict=False)
    except ValueError:
        if not is_host_name(item):
            raise ValueError(
                f"SSRF allow-list entry {entry!r} is neither an address, a network nor a host name"
            ) from None
        return item
