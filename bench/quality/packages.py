"""Which man pages a fresh machine of this image has: those of Debian packages in the image's
package list, at the same version, and unmodified (dpkg's md5sums)."""

import hashlib
from dataclasses import dataclass
from pathlib import Path

IMAGE_PACKAGES = Path("/work/.library/env/packages/installed-python.txt")
DPKG_INFO = Path("/var/lib/dpkg/info")
DPKG_STATUS = Path("/var/lib/dpkg/status")
SECTIONS = ("man1", "man8")


@dataclass(frozen=True)
class Owner:
    package: str
    version: str
    md5: str  # of the installed file, as dpkg recorded it


def image_packages(path: Path = IMAGE_PACKAGES) -> dict[str, str]:
    """Debian package -> version, as the image's list has them."""
    packages = {}
    for line in path.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] == "apt":
            packages[fields[1]] = fields[2]
    return packages


def installed_versions() -> dict[str, str]:
    versions, package = {}, None
    for line in DPKG_STATUS.read_text(errors="replace").splitlines():
        if line.startswith("Package: "):
            package = line.removeprefix("Package: ").strip()
        elif line.startswith("Version: ") and package:
            versions[package] = line.removeprefix("Version: ").strip()
    return versions


def page_owners() -> dict[Path, Owner]:
    """Every man1/man8 file that dpkg installed, with its package, version and md5."""
    versions = installed_versions()
    owners = {}
    prefixes = tuple(f"usr/share/man/{s}/" for s in SECTIONS)
    for sums in DPKG_INFO.glob("*.md5sums"):
        package = sums.name.removesuffix(".md5sums").split(":")[0]
        for line in sums.read_text(errors="replace").splitlines():
            md5, _, relative = line.partition("  ")
            if relative.startswith(prefixes):
                owners[Path("/") / relative] = Owner(package, versions.get(package, ""), md5)
    return owners


def md5_of(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()
