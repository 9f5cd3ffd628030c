"""A real Kubernetes control plane for the tests: etcd, kube-apiserver and kube-controller-manager on 127.0.0.1.

The Kubernetes controller's verdicts (a Deployment scaled to 0 has no pod left,
a rollout completed or stalled, a pod restarted) are Kubernetes' behaviour, not
ours, so its tests talk to the real API server and the real Deployment,
ReplicaSet and StatefulSet controllers, built from their Go modules by
``scripts/k8s-control-plane.sh`` (cached outside the checkout)::

    plane = KubeControlPlane(tmp).start()       # certificates, etcd, kube-apiserver, kube-controller-manager
    plane.admin_kubeconfig                      # a kubeconfig file for an admin (system:masters) token
    node = plane.start_node()                   # the node agent (kube_node): pods run as local processes

Everything is real except the container runtime (see :mod:`.kube_node`). The
TLS is real too: a CA made per session signs the API server's certificate, and
clients verify it; it also signs the node agent's kubelet API certificate and the
API server's kubelet client certificate, so ``pods/log`` is proxied over TLS
verified both ways (``--kubelet-*`` flags, :mod:`.kube_node_logs`). Users are
tokens (``--token-auth-file``: the admin in ``system:masters``) and
ServiceAccounts (TokenRequest, :meth:`service_account_kubeconfig`), so RBAC
is the API server's own. Processes run in the foreground as children of this Python
and die with it; their logs are in the work directory. Start-up waits
for ``/readyz`` and for the controller manager's first ServiceAccount, never for
a fixed delay.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import secrets
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from airflow_provider_kip848.kafka.cli.distribution import tail_lines
from kip848_harness.errors import LocalKafkaError
from kip848_harness.kube_node import KubeNode
from kip848_harness.kube_node_logs import APISERVER_CLIENT_CN
from kip848_harness.processes import die_with_parent, send_signal
from kip848_harness.sshd import free_port
from kip848_harness.waiting import wait_until

#: the Kubernetes release scripts/k8s-control-plane.sh builds (keep both in step)
K8S_VERSION = "v1.37.2"
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "k8s-control-plane.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
#: the controllers a Deployment, a StatefulSet and RBAC need; node lifecycle is left out (the node agent sends no
#: heartbeats, and nothing must evict its pods), and so is pod garbage collection
CONTROLLERS = ("deployment-controller", "replicaset-controller", "statefulset-controller",
               "serviceaccount-controller", "garbage-collector-controller", "namespace-controller",
               "clusterrole-aggregation-controller", "root-ca-certificate-publisher-controller")
ADMIN_USER = "kip848-admin"


class KubeControlPlaneError(LocalKafkaError):
    """The control plane could not be built or started; the message names the log or the step."""

    remedy = "Read the log named above (etcd.log, kube-apiserver.log, kube-controller-manager.log); fix and retry."


def cache_dir() -> Path:
    """Where scripts/k8s-control-plane.sh keeps the binaries (outside the checkout)."""
    base = os.environ.get("KIP848_K8S_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kip848", "k8s")
    return Path(base) / K8S_VERSION / "bin"


def ensure_binaries() -> Path:
    """The binaries' directory, building them first when they are not cached (the script prints the build time)."""
    result = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            timeout=3600)
    if result.returncode != 0:
        raise KubeControlPlaneError(f"{BUILD_SCRIPT.name} failed ({result.returncode}): "
                                    f"{tail_lines(result.stdout + result.stderr, 15)}")
    return cache_dir()


# -- certificates -------------------------------------------------------------------------------------------------

def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _certificate(subject: str, key: rsa.RSAPrivateKey, *, issuer: x509.Certificate | None = None,
                 issuer_key: rsa.RSAPrivateKey | None = None, hosts: tuple[str, ...] = (),
                 client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.subject if issuer is not None else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2)))
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False), critical=True)
    else:
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def kubeconfig(server: str, ca_pem: bytes, token: str, *, user: str, namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig (as a dict) for ``server`` with a bearer ``token``; the CA is embedded."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": user,
            "clusters": [{"name": "kip848-test", "cluster": {
                "server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "kip848-test", "user": user, "namespace": namespace}}]}


class KubeControlPlane:
    """etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 and free ports, with a CA of their own."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path | str, *, bin_dir: Path | None = None) -> None:
        self.workdir = Path(workdir).absolute()
        self.bin_dir = bin_dir
        self.api_port = 0
        self.admin_token = secrets.token_hex(24)
        #: seconds from launching etcd to a ready API server and controller manager, after :meth:`start`
        self.ready_seconds: float | None = None
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []
        self._nodes: list[Any] = []

    # -- where things are ---------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self.api_port}"

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def ca_pem(self) -> bytes:
        return (self.pki / "ca.crt").read_bytes()

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # -- starting -------------------------------------------------------------------------------------------

    def _write_pki(self) -> None:
        self.pki.mkdir(parents=True, exist_ok=True)
        ca_key = _key()
        ca = _certificate("kip848-test-ca", ca_key)
        server_key = _key()
        server = _certificate("kube-apiserver", server_key, issuer=ca, issuer_key=ca_key,
                              hosts=(self.host, "localhost", "kubernetes", "kubernetes.default.svc", "10.0.0.1"))
        # the node agents' kubelet API (pod logs): their serving certificate, and the API server's client one
        kubelet_key, client_key = _key(), _key()
        kubelet = _certificate("kip848-node-agent", kubelet_key, issuer=ca, issuer_key=ca_key,
                               hosts=(self.host, "localhost"))
        kubelet_client = _certificate(APISERVER_CLIENT_CN, client_key, issuer=ca, issuer_key=ca_key, client=True)
        sa_key = _key()
        (self.pki / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        (self.pki / "apiserver.crt").write_bytes(server.public_bytes(serialization.Encoding.PEM))
        (self.pki / "kubelet.crt").write_bytes(kubelet.public_bytes(serialization.Encoding.PEM))
        (self.pki / "apiserver-kubelet-client.crt").write_bytes(kubelet_client.public_bytes(serialization.Encoding.PEM))
        for path, key in ((self.pki / "apiserver.key", server_key), (self.pki / "sa.key", sa_key),
                          (self.pki / "kubelet.key", kubelet_key),
                          (self.pki / "apiserver-kubelet-client.key", client_key)):
            path.write_bytes(_pem_key(key))
            path.chmod(0o600)
        (self.pki / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        tokens = self.pki / "tokens.csv"
        tokens.write_text(f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)

    def _launch(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.log(name), "ab")  # noqa: SIM115 - kept open for the process's life, closed by stop()
        self._logs.append(log)
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=self.workdir, preexec_fn=die_with_parent, start_new_session=True)
        self._processes[name] = process
        return process

    def _binary(self, name: str) -> str:
        assert self.bin_dir is not None
        return str(self.bin_dir / name)

    def _get(self, path: str, token: str | None = None) -> tuple[int, bytes]:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        request = urllib.request.Request(self.server + path,
                                         headers={"Authorization": f"Bearer {token or self.admin_token}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()

    def _alive(self) -> None:
        for name, process in self._processes.items():
            if process.poll() is not None:
                raise KubeControlPlaneError(f"{name} exited with {process.returncode}: "
                                            f"{tail_lines(self.log(name).read_text(errors='replace'), 15)}")

    def _get_alive(self, path: str) -> int:
        """The status of GET ``path``, after checking that no process of the plane has exited."""
        self._alive()
        return self._get(path)[0]

    def _ready(self, path: str) -> bool:
        self._alive()
        try:
            status, body = self._get(path)
        except OSError:
            return False
        return status == 200 and body.strip() == b"ok"

    def start(self, timeout: float = 120.0) -> KubeControlPlane:
        """Build the binaries when they are not cached, then start etcd, the API server and the controller
        manager; return once the API server is ready and the controllers create ServiceAccounts."""
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_pki()
        started = time.monotonic()
        etcd_port, peer_port, self.api_port = free_port(), free_port(), free_port()
        etcd = f"http://{self.host}:{etcd_port}"
        peer = f"http://{self.host}:{peer_port}"
        self._launch("etcd", [
            self._binary("etcd"), "--name=n0", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={etcd}", f"--advertise-client-urls={etcd}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=n0={peer}",
            "--unsafe-no-fsync", "--log-level=warn"])
        self._launch("kube-apiserver", [
            self._binary("kube-apiserver"), f"--etcd-servers={etcd}",
            f"--bind-address={self.host}", f"--advertise-address={self.host}", f"--secure-port={self.api_port}",
            f"--tls-cert-file={self.pki / 'apiserver.crt'}", f"--tls-private-key-file={self.pki / 'apiserver.key'}",
            f"--token-auth-file={self.pki / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki / 'sa.pub'}",
            f"--service-account-signing-key-file={self.pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false", f"--cert-dir={self.workdir / 'apiserver-certs'}",
            # pods/log goes to the node agent's kubelet API (kube_node_logs.py) at the Node's InternalIP, over TLS
            # both ways: its certificate verified against the plane's CA, the API server's client one presented
            f"--kubelet-client-certificate={self.pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={self.pki / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={self.pki / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP", "-v=1"])
        self.admin_kubeconfig.write_text(json.dumps(
            kubeconfig(self.server, self.ca_pem, self.admin_token, user=ADMIN_USER)))
        self.admin_kubeconfig.chmod(0o600)
        try:
            wait_until(lambda: self._ready("/readyz"), timeout=timeout, what="kube-apiserver /readyz",
                       interval=0.1)
        except TimeoutError as exc:
            apiserver_log = self.log("kube-apiserver").read_text(errors="replace")
            raise KubeControlPlaneError(f"{exc}; {tail_lines(apiserver_log, 10)}") from exc
        self._launch("kube-controller-manager", [
            self._binary("kube-controller-manager"), f"--kubeconfig={self.admin_kubeconfig}",
            "--leader-elect=false", f"--bind-address={self.host}", f"--secure-port={free_port()}",
            f"--controllers={','.join(CONTROLLERS)}", f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}", "--concurrent-deployment-syncs=2",
            "--concurrent-statefulset-syncs=2", "--kube-api-qps=100", "--kube-api-burst=200", "-v=1"])
        try:  # the ServiceAccount controller makes `default` in every namespace: pods can be created from then on
            wait_until(lambda: self._get_alive("/api/v1/namespaces/default/serviceaccounts/default") == 200,
                       timeout=timeout, what="the default ServiceAccount (kube-controller-manager)", interval=0.1)
        except TimeoutError as exc:
            raise KubeControlPlaneError(
                f"{exc}; {tail_lines(self.log('kube-controller-manager').read_text(errors='replace'), 10)}") from exc
        self.ready_seconds = time.monotonic() - started
        return self

    def start_node(self, name: str = "kip848-node-0", timeout: float = 60.0) -> KubeNode:
        """Start the node agent (:mod:`.kube_node`) as ``name``; return once its Node is Ready."""
        node = KubeNode(self.admin_kubeconfig, name, self.workdir / name,
                        tls=(self.pki / "kubelet.crt", self.pki / "kubelet.key", self.pki / "ca.crt")).start()
        self._nodes.append(node)

        def ready() -> bool:
            if not node.alive():
                raise KubeControlPlaneError(f"the node agent exited: {tail_lines(node.log_path.read_text(), 15)}")
            status, body = self._get(f"/api/v1/nodes/{name}")
            conditions = json.loads(body).get("status", {}).get("conditions", []) if status == 200 else []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        wait_until(ready, timeout=timeout, what=f"node {name} Ready", interval=0.1)
        return node

    # -- identities -----------------------------------------------------------------------------------------

    def kubeconfig_for_token(self, token: str, *, user: str, namespace: str = "default") -> dict[str, Any]:
        return kubeconfig(self.server, self.ca_pem, token, user=user, namespace=namespace)

    def admin_config(self, namespace: str = "default") -> dict[str, Any]:
        """The admin's kubeconfig as a dict (the ``kube_config`` extra of an Airflow Kubernetes connection)."""
        return self.kubeconfig_for_token(self.admin_token, user=ADMIN_USER, namespace=namespace)

    # -- stopping -------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the node agents, then the controller manager, the API server and etcd (SIGTERM, then SIGKILL)."""
        for node in self._nodes:
            node.stop()
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            process = self._processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            send_signal(process.pid, 15)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                send_signal(process.pid, 9)
                process.wait(timeout=15)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def __enter__(self) -> KubeControlPlane:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


class KubeNamespace:
    """A namespace of the control plane for one test, with an admin client and an Airflow connection to it.

    ``conn_uri`` is the Airflow connection (type ``kubernetes``, the kubeconfig in its ``kube_config`` extra:
    nothing written to disk) a controller's target names; :meth:`service_account_connection` makes one for a
    ServiceAccount bound to a Role (a TokenRequest token), to test RBAC."""

    def __init__(self, plane: KubeControlPlane, name: str) -> None:
        self.plane, self.name = plane, name
        self.api = config.new_client_from_config_dict(plane.admin_config(name))
        self.core, self.apps = client.CoreV1Api(self.api), client.AppsV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.core.create_namespace({"metadata": {"name": name}})

    def connection(self, config_dict: dict[str, Any], namespace: str | None = None) -> str:
        """An Airflow connection URI (JSON) of type kubernetes for ``config_dict``."""
        return json.dumps({"conn_type": "kubernetes",
                           "extra": {"kube_config": config_dict, "namespace": namespace or self.name}})

    @property
    def admin_connection(self) -> str:
        return self.connection(self.plane.admin_config(self.name))

    def create(self, manifest: dict[str, Any]) -> None:
        """Create a Deployment, StatefulSet, ConfigMap, Role, RoleBinding or ServiceAccount in this namespace."""
        kind = manifest["kind"]
        create = {"Deployment": self.apps.create_namespaced_deployment,
                  "StatefulSet": self.apps.create_namespaced_stateful_set,
                  "ConfigMap": self.core.create_namespaced_config_map,
                  "ServiceAccount": self.core.create_namespaced_service_account,
                  "Role": self.rbac.create_namespaced_role,
                  "RoleBinding": self.rbac.create_namespaced_role_binding}[kind]
        create(self.name, manifest)

    def service_account_connection(self, account: str, rules: list[dict[str, Any]] | None,
                                   namespace: str | None = None) -> str:
        """A ServiceAccount ``account`` here, bound to a Role of ``rules`` (None: no Role at all), and an Airflow
        connection with its token (TokenRequest, one hour) whose default namespace is ``namespace``."""
        self.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}})
        if rules is not None:
            self.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                         "metadata": {"name": account}, "rules": rules})
            self.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": account},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
                         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.name}]})
        token = self.core.create_namespaced_service_account_token(
            account, self.name, {"spec": {"expirationSeconds": 3600}}).status.token
        return self.connection(self.plane.kubeconfig_for_token(token, user=account, namespace=namespace or self.name),
                               namespace)

    def delete(self) -> None:
        """Delete the namespace (its workloads' pods are stopped by the node agent, their grace honoured)."""
        try:
            self.core.delete_namespace(self.name)
        except ApiException:
            pass
        self.api.close()
