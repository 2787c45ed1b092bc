"""A real OpenLDAP `slapd` for tests: started on a free loopback port with a
fixture directory (people, groups, a nested group), stopped at the end.

Unit tests start it through the session fixture in
`tests/unit/accounts/conftest.py`; browser tests can reuse it:

    with LdapServer() as directory:
        settings_for_ldap(directory)  # env-style values for portal.settings
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import ldap

from tests.ports import free_port

SLAPD = shutil.which("slapd") or "/usr/sbin/slapd"
SLAPADD = shutil.which("slapadd") or "/usr/sbin/slapadd"
SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")

BASE_DN = "dc=flowport,dc=test"
PEOPLE_DN = f"ou=people,{BASE_DN}"
GROUPS_DN = f"ou=groups,{BASE_DN}"
BIND_DN = f"cn=portal,ou=services,{BASE_DN}"
BIND_PASSWORD = "portal-bind-secret"
ROOT_DN = f"cn=admin,{BASE_DN}"
ROOT_PASSWORD = "root-secret"

# username → (password, given name, surname)
PEOPLE: dict[str, tuple[str, str, str]] = {
    "alice": ("alice-pw", "Alice", "Archer"),  # flowport-users directly, etl-team
    "bob": ("bob-pw", "Bob", "Baker"),  # flowport-users only through data-eng (nested)
    "carol": ("carol-pw", "Carol", "Cook"),  # in no portal group
    "dana": ("dana-pw", "Dana", "Diaz"),  # staff
    "erin": ("erin-pw", "Erin", "Evans"),  # superuser
    "proxy": ("proxy-pw", "Proxy", "Service"),  # may act for others
    "admin": ("admin-pw", "Ad", "Min"),  # a real user named like the injection target
}
# group → members (people, or "cn=<group>" for a nested group)
GROUPS: dict[str, list[str]] = {
    "flowport-users": ["alice", "cn=data-eng", "dana", "erin", "proxy", "admin"],
    "data-eng": ["bob"],
    "etl-team": ["alice"],
    "flowport-staff": ["dana"],
    "flowport-admins": ["erin"],
    "flowport-proxies": ["proxy"],
}


def _member_dn(member: str) -> str:
    if member.startswith("cn="):
        return f"{member},{GROUPS_DN}"
    return f"uid={member},{PEOPLE_DN}"


def fixture_ldif() -> str:
    entries = [
        f"dn: {BASE_DN}\nobjectClass: dcObject\nobjectClass: organization\ndc: flowport\no: Flowport Test",
        f"dn: {PEOPLE_DN}\nobjectClass: organizationalUnit\nou: people",
        f"dn: {GROUPS_DN}\nobjectClass: organizationalUnit\nou: groups",
        f"dn: ou=services,{BASE_DN}\nobjectClass: organizationalUnit\nou: services",
        f"dn: {BIND_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
        f"cn: portal\nuserPassword: {BIND_PASSWORD}",
    ]
    for uid, (password, given, surname) in PEOPLE.items():
        entries.append(
            f"dn: uid={uid},{PEOPLE_DN}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {given} {surname}\n"
            f"givenName: {given}\nsn: {surname}\nmail: {uid}@flowport.test\nuserPassword: {password}"
        )
    for name, members in GROUPS.items():
        lines = "\n".join(f"member: {_member_dn(member)}" for member in members)
        entries.append(f"dn: cn={name},{GROUPS_DN}\nobjectClass: groupOfNames\ncn: {name}\n{lines}")
    return "\n\n".join(entries) + "\n"


def _slapd_conf(data_dir: Path, pid_file: Path) -> str:
    schemas = "\n".join(
        f"include {SCHEMA_DIR / name}.schema" for name in ("core", "cosine", "inetorgperson", "nis")
    )
    return f"""{schemas}
pidfile {pid_file}
modulepath {MODULE_DIR}
moduleload back_mdb
database mdb
maxsize 10485760
suffix "{BASE_DN}"
rootdn "{ROOT_DN}"
rootpw {ROOT_PASSWORD}
directory {data_dir}
access to attrs=userPassword by anonymous auth by self read by * none
access to * by * read
"""


@dataclass
class LdapServer:
    """A throwaway slapd; `uri` is set once started."""

    port: int = 0
    uri: str = ""
    _workdir: Path | None = None
    _process: subprocess.Popen | None = None
    log: list[str] = field(default_factory=list)

    def start(self) -> LdapServer:
        self._workdir = Path(tempfile.mkdtemp(prefix="flowport-slapd-"))
        data_dir = self._workdir / "data"
        data_dir.mkdir()
        conf = self._workdir / "slapd.conf"
        conf.write_text(_slapd_conf(data_dir, self._workdir / "slapd.pid"))
        ldif = self._workdir / "fixture.ldif"
        ldif.write_text(fixture_ldif())
        subprocess.run([SLAPADD, "-f", str(conf), "-l", str(ldif)], check=True, capture_output=True)
        self.port = free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}"
        self._process = subprocess.Popen(
            [SLAPD, "-f", str(conf), "-h", f"{self.uri}/", "-d", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                err = self._process.stderr.read().decode() if self._process.stderr else ""
                raise RuntimeError(f"slapd exited early: {err}")
            try:
                conn = ldap.initialize(self.uri)
                conn.simple_bind_s(BIND_DN, BIND_PASSWORD)
                conn.unbind_s()
                return
            except ldap.LDAPError:
                time.sleep(0.1)
        raise RuntimeError(f"slapd did not answer on {self.uri} within {timeout}s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> LdapServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def env_for(server: LdapServer, **overrides: str) -> dict[str, str]:
    """The environment variables that point Flowport at this server."""
    values = {
        "LDAP_SERVER_URI": server.uri,
        "LDAP_BIND_DN": BIND_DN,
        "LDAP_BIND_PASSWORD": BIND_PASSWORD,
        "LDAP_USER_SEARCH_BASE": PEOPLE_DN,
        "LDAP_GROUP_SEARCH_BASE": GROUPS_DN,
        "LDAP_GROUP_TYPE": "nested_groupofnames",
        "LDAP_REQUIRE_GROUP": f"cn=flowport-users,{GROUPS_DN}",
        "LDAP_STAFF_GROUP": f"cn=flowport-staff,{GROUPS_DN}",
        "LDAP_SUPERUSER_GROUP": f"cn=flowport-admins,{GROUPS_DN}",
    }
    values.update(overrides)
    return values
