"""ATOLL_URL_ALLOW holds for what is finally opened: a real HTTP server that redirects from an
allowed prefix elsewhere, index pages whose links climb out, and local spellings (``~``,
``file://a/b``, ``file:/x``) that fsspec's real openers read somewhere else than they say."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import make_test_server, tar_gz

ALLOWED_WORLD = tar_gz([("ok.txt", b"allowed")])
SECRET_WORLD = tar_gz([("secret.txt", b"from outside the allow-list")])


class _Store(BaseHTTPRequestHandler):
    """/worlds/ is the allowed prefix; /secret/ is not."""

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        path = self.path.split("?")[0]
        port = self.server.server_address[1]
        redirects = {
            "/worlds/out.tar.gz": "/secret/s.tar.gz",
            "/worlds/out-absolute.tar.gz": f"http://127.0.0.1:{port}/secret/s.tar.gz",
            "/worlds/hop.tar.gz": "/worlds/w.tar.gz",
            "/worlds/two-hops.tar.gz": "/worlds/hop-out.tar.gz",
            "/worlds/hop-out.tar.gz": "/secret/s.tar.gz",
        }
        if path in redirects:
            self.send_response(302)
            self.send_header("Location", redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        index = f'<a href="http://127.0.0.1:{port}/worlds/dir/../../secret/s.txt">s</a>'.encode()
        bodies = {
            "/worlds/w.tar.gz": ALLOWED_WORLD,
            "/secret/s.tar.gz": SECRET_WORLD,
            "/secret/s.txt": b"from outside the allow-list",
            # An index page whose link starts with the folder's URL and climbs out of it.
            "/worlds/dir/": index,
            "/worlds/dir": index,
        }
        if path not in bodies:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(bodies[path])))
        self.end_headers()
        if not head:
            self.wfile.write(bodies[path])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def store() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Store)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def serve(settings: EnvironmentSettings) -> Iterator:
    servers: list[EnvironmentServer] = []

    def start(**changes: object) -> EnvironmentServer:
        changed = EnvironmentSettings(**{**settings.model_dump(), **changes})
        server = EnvironmentServer(changed, server_factory=make_test_server).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _populate(env: EnvironmentServer, url: str) -> httpx.Response:
    with httpx.Client(base_url=env.url, timeout=30) as http:
        return http.post("/data/populate", json={"sources": [{"url": url}]})


def test_a_redirect_out_of_the_allow_list_is_not_followed(serve, settings, store):
    env = serve(url_allow=f"{store}/worlds/")
    assert _populate(env, f"{store}/worlds/w.tar.gz").status_code == 200
    # A redirect that stays under the prefix is followed.
    assert _populate(env, f"{store}/worlds/hop.tar.gz").status_code == 200
    for name in ("out.tar.gz", "out-absolute.tar.gz", "two-hops.tar.gz"):
        reply = _populate(env, f"{store}/worlds/{name}")
        assert reply.status_code == 403, (name, reply.text)
        error = reply.json()["detail"]["error"]
        assert f"{store}/secret/s.tar.gz" in error and "redirect" in error, error
    assert not (settings.fs_root / "secret.txt").exists()
    assert (settings.fs_root / "ok.txt").read_bytes() == b"allowed"


def test_files_listed_by_an_index_page_are_checked_one_by_one(serve, settings, store):
    env = serve(url_allow=f"{store}/worlds/")
    reply = _populate(env, f"{store}/worlds/dir/")
    assert reply.status_code == 403, reply.text
    assert f"{store}/worlds/dir/../../secret/s.txt" in reply.json()["detail"]["error"]
    assert not list(settings.fs_root.rglob("s.txt"))


def test_without_an_allow_list_redirects_are_followed(serve, settings, store):
    env = serve()
    assert _populate(env, f"{store}/worlds/out.tar.gz").status_code == 200
    assert (settings.fs_root / "secret.txt").exists()


def test_tilde_is_never_expanded(serve, settings, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "w.tar.gz").write_bytes(SECRET_WORLD)
    monkeypatch.setenv("HOME", str(home))
    env = serve()
    for url in ("~/w.tar.gz", "file://~/w.tar.gz", "local://~/w.tar.gz"):
        reply = _populate(env, url)
        assert reply.status_code == 400, (url, reply.text)
        assert repr(url) in reply.json()["detail"]["error"] and "'~'" in reply.json()["detail"]["error"]
    with httpx.Client(base_url=env.url, timeout=30) as http:
        reply = http.post("/data/snapshot/s3", json={"url": "~/snap.tar.gz"})
    assert reply.status_code == 400, reply.text
    assert sorted(p.name for p in home.iterdir()) == ["w.tar.gz"]
    assert not (settings.fs_root / "secret.txt").exists()


def test_relative_file_urls_are_refused_not_opened_from_the_working_directory(
    serve, settings, tmp_path, monkeypatch
):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "w.tar.gz").write_bytes(ALLOWED_WORLD)
    # fsspec opens file://<rest> as <cwd>/<rest>: plant a different archive there.
    elsewhere = tmp_path / "cwd"
    planted = elsewhere / str(allowed).lstrip("/") / "w.tar.gz"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(SECRET_WORLD)
    monkeypatch.chdir(elsewhere)
    env = serve(url_allow=f"file://{allowed}/")
    relative = "file://" + str(allowed / "w.tar.gz").lstrip("/")
    reply = _populate(env, relative)
    assert reply.status_code == 400, reply.text
    assert repr(relative) in reply.json()["detail"]["error"] and "absolute" in reply.json()["detail"]["error"]
    # "file:" without the slashes: fsspec strips it and opens the absolute path behind it.
    outside = tmp_path / "outside.tar.gz"
    outside.write_bytes(SECRET_WORLD)
    monkeypatch.chdir(allowed)
    assert _populate(env, f"file:{outside}").status_code == 400
    assert not (settings.fs_root / "secret.txt").exists()
    assert _populate(env, f"file://{allowed}/w.tar.gz").status_code == 200
    assert (settings.fs_root / "ok.txt").exists()


def test_a_local_source_is_opened_by_the_real_path_that_was_checked(tmp_path):
    from environment.url_policy import resolve_url

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "link").symlink_to(tmp_path)
    assert resolve_url(f"{allowed}/../allowed/w.tar.gz", [], "source") == f"file://{allowed}/w.tar.gz"
    assert resolve_url(f"file://{allowed}/link/x", [], "source") == f"file://{tmp_path}/x"
    assert resolve_url("s3://bucket/a/b", ["s3://bucket/"], "source") == "s3://bucket/a/b"
    for climbing in ("s3://bucket/a/..\\..\\other/x", "s3://bucket/a/%5C..%5Cx"):
        with pytest.raises(Exception, match="segments are not allowed"):
            resolve_url(climbing, ["s3://bucket/"], "source")
    with pytest.raises(Exception, match="absolute"):
        resolve_url("a/b.tar.gz", [], "source")
