"""One trial's disposable directory: assemble, baseline snapshot, diff, cleanup.

Layout of a trial directory (``<tmp>/atlante-eval-<run_id>/<scenario>-<trial>/``)::

    sandbox/       the agent's working directory (the fixture plus the native outputs)
    home/          a private HOME for the host (credentials, trust entry, host config)
    baseline.git/  a bare git repository holding the baseline's blobs (its tree id and entries are
                   kept in memory: nothing in this repository is trusted after the session)

Why the baseline is built the way it is: the agent has a shell and may run ``git init``,
``git reset --hard``, delete or forge a ``.git``, or write a ``.gitignore``/``.gitattributes`` that
would make ``git add -A`` skip or rewrite files.  None of that may hide a change.  So git never
looks at the sandbox at all: this module walks the sandbox itself (no ignore rules, no attribute
filters, no nested-repository detection), writes every entry as a git blob object straight into the
bare repository outside the sandbox, and keeps each path's mode and object id (and the tree id) in
memory.  The agent can reach that repository too (``GIT_DIR=../baseline.git``), so after the
session nothing in it is trusted: changed paths come from the in-memory entries, and the diff text
is a tree-to-tree ``git diff`` in a repository created after the session from verified objects,
where no attribute or config from the sandbox or the agent applies.

What counts as a change (sorted relative POSIX paths in ``Diff.changed_paths``, each in its shown
form, :func:`pytest_atlante.pathnames.escape_path`: a name that is not UTF-8 or holds control
characters is escaped there and in the diff text's headers alike):

- added, modified and deleted files, executable-bit changes, symlinks (their target is the content);
- entries git cannot store as files are stored as a one-line placeholder blob, so they still show
  up: FIFOs, sockets and devices (``<atlante: fifo>``), unreadable files and unlistable directories;
- files over ``gitobjects.LARGE_FILE_BYTES`` are stored as a one-line summary (size and SHA-256): a change
  shows as that line changing, and nothing ever loads the file whole;
- a ``.git`` entry (any letter case, file or directory, at any depth) created, removed, or changed
  between file and directory is reported as the path of that ``.git`` entry.  Its contents are git
  metadata, not project files, so changes *inside* a ``.git`` that already existed at the baseline
  (a setup that ran ``git init``) are not reported;
- empty directories are not tracked (as in git); a check that needs one can use ``file-exists``.

The host-owned directory (``.claude`` or ``.opencode`` at the sandbox root) is excluded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pytest_atlante.fsutil import sha256_file
from pytest_atlante.pathnames import escape_path
from pytest_atlante.sandbox import gitobjects
from pytest_atlante.sandbox.gitdiff import shown_diff
from pytest_atlante.sandbox.gitobjects import CHUNK, Entry

# Config given on the environment (GIT_CONFIG_COUNT) wins over the repository's own config file.
_FORCED = (
    ("core.hooksPath", os.devnull),
    ("core.attributesFile", os.devnull),
    ("core.fsmonitor", "false"),
    ("diff.external", ""),
)
_FORCED_CONFIG = {"GIT_CONFIG_COUNT": str(len(_FORCED))} | {
    f"GIT_CONFIG_{kind}_{i}": value for i, pair in enumerate(_FORCED) for kind, value in zip(("KEY", "VALUE"), pair, strict=True)
}
# `git diff` output beyond this is cut: the report keeps 20,000 characters anyway, and a trial that
# writes a huge file must not make the runner hold all of it in memory.
DIFF_READ_LIMIT = 2_000_000
# Files over ``gitobjects.LARGE_FILE_BYTES`` are stored (in both snapshots) as a one-line summary holding
# their size and SHA-256: the diff says what changed without git loading a multi-GiB blob into
# memory (``core.bigFileThreshold`` does not stop a tree-to-tree diff from reading it), and the
# report keeps 20,000 characters of diff anyway.
_GIT_TIMEOUT_S = 300.0

# Every run directory is named so; the report scrubs any path through one (redact.redact_sandbox_paths).
SANDBOX_DIR_PREFIX = "atlante-eval-"


class SandboxError(Exception):
    """The sandbox could not be assembled, snapshotted or diffed: the trial is an infra-error."""


class OverlayCollision(Exception):
    """Fixture files sit at the same relative path as verified native outputs."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        listed = ", ".join(paths)
        super().__init__(
            f"fixture file(s) collide with native outputs of the build: {listed}; "
            "rename or remove these files in the fixture"
        )


@dataclass
class Sandbox:
    trial_dir: Path
    root: Path
    home: Path
    git_dir: Path
    digests: dict[str, str | None] = field(default_factory=dict)
    # The baseline as this process saw it: never re-read from anything the agent can write.
    baseline_tree: str = ""
    baseline_entries: dict[str, Entry] = field(default_factory=dict)
    # `.git` entries present at the baseline (relative path -> "dir" | "file" | "symlink").
    git_markers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Diff:
    changed_paths: list[str]  # sorted, each in its shown form (``escape_path``)
    text: str
    # shown form -> the name as the walk saw it (a str with surrogate escapes), where the two differ
    names: dict[str, str] = field(default_factory=dict)

    def name_of(self, shown: str) -> str:
        """The name itself behind one of ``changed_paths`` (what a glob is matched against)."""
        return self.names.get(shown, shown)


def run_dir(run_id: str) -> Path:
    """The run's directory in the OS temp dir, as a realpath (macOS ``/tmp`` is a symlink)."""
    _require_plain_name(run_id, "run id")
    return Path(os.path.realpath(tempfile.gettempdir())) / f"{SANDBOX_DIR_PREFIX}{run_id}"


def assemble(
    run_id: str, scenario: str, trial: int, fixture: Path, overlay: Path | None
) -> Sandbox:
    """Create the trial directory: the fixture copied, the build tree overlaid, an empty home.

    Collisions are found before anything is created, and a failed copy removes the half-made trial
    directory, so an exception never leaves a directory the caller has no ``Sandbox`` for.
    """
    _require_plain_name(scenario, "scenario name")
    if overlay is not None:
        collisions = _overlay_collisions(fixture, overlay)
        if collisions:
            raise OverlayCollision(collisions)
    parent = run_dir(run_id)
    parent.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(parent)
    # /tmp is shared: never work inside a run directory someone else planted for us.
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        raise SandboxError(f"{parent} is not a directory owned by this user")
    trial_dir = parent / f"{scenario}-{trial}"
    try:
        trial_dir.mkdir(mode=0o700)
    except FileExistsError as exc:
        raise SandboxError(f"trial directory {trial_dir} already exists") from exc
    sandbox_dir = trial_dir / "sandbox"
    try:
        # symlinks=True copies a link as a link; validation rejects symlinked fixtures anyway.
        shutil.copytree(fixture, sandbox_dir, symlinks=True, copy_function=copy_sparse)
        if overlay is not None:
            shutil.copytree(overlay, sandbox_dir, symlinks=True, dirs_exist_ok=True, copy_function=copy_sparse)
        (trial_dir / "home").mkdir(mode=0o700)
    except (OSError, shutil.Error) as exc:
        remove_tree(trial_dir)
        raise SandboxError(f"cannot assemble the sandbox from {fixture}: {exc}") from exc
    return Sandbox(
        trial_dir=trial_dir,
        root=Path(os.path.realpath(sandbox_dir)),
        home=trial_dir / "home",
        git_dir=trial_dir / "baseline.git",
    )


def copy_sparse(src: str, dst: str) -> str:
    """``shutil.copy2`` that keeps holes: a 2 GiB sparse fixture file stays 2 GiB of nothing.

    Only the data extents (``SEEK_DATA``/``SEEK_HOLE``) are copied, then the file is extended to
    its full size; where the filesystem cannot report extents the whole file is copied.
    """
    if not hasattr(os, "SEEK_DATA") or os.path.islink(src):
        return str(shutil.copy2(src, dst, follow_symlinks=False))
    with open(src, "rb") as source, open(dst, "wb") as target:
        size = os.fstat(source.fileno()).st_size
        offset = 0
        try:
            while offset < size:
                try:
                    start = os.lseek(source.fileno(), offset, os.SEEK_DATA)
                except OSError:  # ENXIO: only a hole is left
                    break
                end = os.lseek(source.fileno(), start, os.SEEK_HOLE)
                source.seek(start)
                target.seek(start)
                remaining = end - start
                while remaining > 0:
                    chunk = source.read(min(remaining, CHUNK * 16))
                    if not chunk:
                        break
                    target.write(chunk)
                    remaining -= len(chunk)
                offset = end
        except OSError:  # no extent support: copy it whole
            source.seek(0)
            target.seek(0)
            shutil.copyfileobj(source, target)
        target.truncate(size)
    shutil.copystat(src, dst, follow_symlinks=False)
    return dst


def snapshot(sb: Sandbox, unchanged_paths: Iterable[str]) -> None:
    """Record the baseline (after setup ran): its entries and tree id in memory, blobs on disk.

    The blobs go into the bare repository, which the agent can reach; what they should be (every
    path's mode and object id, and the tree id) stays in this process, so a moved ref, a rewritten
    tree or a swapped object cannot change what the trial is compared against.
    """
    gitobjects.init_bare(sb.git_dir)
    entries, sb.git_markers, _ = _scan_or_fail(sb, ignore_dir=None, objects=sb.git_dir / "objects")
    sb.baseline_entries = entries
    sb.baseline_tree = gitobjects.write_tree(sb.git_dir / "objects", entries)
    sb.digests = {path: path_digest(sb.root, path) for path in unchanged_paths}


def collect_diff(sb: Sandbox, ignore_dir: str) -> Diff:
    """Every change since the baseline, except inside the host-owned ``ignore_dir``.

    Changed paths come from comparing the in-memory baseline entries with a fresh walk.  The diff
    text is made by git in a new repository created now (no config, hooks, attributes, alternates
    or replace refs the agent could have planted), holding only verified objects: the baseline's
    blobs of changed paths are checked against their ids before use, and a missing or altered
    one is a ``SandboxError`` (the trial becomes ``infra-error``), never an empty diff.
    """
    if not sb.baseline_tree:
        raise SandboxError("no baseline was recorded for this trial (internal error)")
    current, markers, walked = _scan_or_fail(sb, ignore_dir=ignore_dir, objects=None)
    baseline = {path: entry for path, entry in sb.baseline_entries.items() if not _under(path, ignore_dir)}
    changed = sorted(path for path in baseline.keys() | current.keys() if baseline.get(path) != current.get(path))
    text = _diff_text(sb, baseline, current, changed, walked) if changed else ""
    baseline_markers = {
        path: kind for path, kind in sb.git_markers.items() if not _under(path, ignore_dir)
    }
    marker_changes = sorted(
        path
        for path in baseline_markers.keys() | markers.keys()
        if baseline_markers.get(path) != markers.get(path)
    )
    if marker_changes:
        notes = [
            f"# {escape_path(path)}: {_describe_marker(baseline_markers.get(path), markers.get(path))}"
            for path in marker_changes
        ]
        text = text + ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes) + "\n"
    shown = {escape_path(path): path for path in set(changed) | set(marker_changes)}
    return Diff(changed_paths=sorted(shown), text=text, names={s: p for s, p in shown.items() if s != p})


def _diff_text(sb: Sandbox, baseline: dict[str, Entry], current: dict[str, Entry], changed: list[str],
               walked: dict[str, str]) -> str:
    # A random name the agent (whose processes are gone by now) could not have prepared.
    git_dir = Path(tempfile.mkdtemp(prefix="diff-", suffix=".git", dir=sb.trial_dir))
    gitobjects.init_bare(git_dir)
    objects = git_dir / "objects"
    for path in changed:
        if path in baseline:
            _copy_verified_blob(sb.git_dir / "objects", objects, baseline[path][1], path)
        if path in current:
            kind, where = walked[path], os.path.join(sb.root, path)
            try:
                stored = gitobjects.store_entry(objects, path, kind, where)[1]
            except (OSError, gitobjects.ChangedWhileReading):
                stored = ""
            if stored != current[path][1]:
                raise SandboxError(f"{escape_path(path)} changed while the diff was being taken")
    old = gitobjects.write_tree(objects, baseline)
    new = gitobjects.write_tree(objects, current)
    return _git(
        sb, "-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--no-textconv",
        "--no-renames", old, new, git_dir=git_dir, limit=DIFF_READ_LIMIT,
        decode=lambda out: shown_diff(out, changed),
    )  # fmt: skip


def _copy_verified_blob(source: Path, target: Path, oid: str, path: str) -> None:
    """Copy the loose baseline blob ``oid`` into ``target`` after checking its content hashes to it."""
    what = f"the baseline copy of {escape_path(path)} (object {oid[:12]})"
    try:
        gitobjects.copy_verified(source, target, oid)
    except FileNotFoundError as exc:
        raise SandboxError(f"{what} is missing: the baseline repository was tampered with") from exc
    except (OSError, zlib.error) as exc:
        raise SandboxError(f"{what} is unreadable or corrupt: the baseline repository was tampered with") from exc
    except ValueError as exc:
        raise SandboxError(f"{what} does not match its id: the baseline repository was tampered with") from exc


@contextlib.contextmanager
def held_logins(logins: Iterable[Path]) -> Iterator[None]:
    """Hold the copied logins open for the session; at its end empty each in place and delete it.

    The agent can hard-link or rename the copied login anywhere it may write (another file in the
    trial HOME, a kept trial's sandbox): deleting the name would leave the token in that link.  So
    the file is opened before the session and truncated through that descriptor afterwards — the
    inode every link shares — and so is whatever regular file sits at the name by then (the host may
    have replaced it by a renamed copy when it refreshed a token).  A symlink at the name is only
    removed, never followed: truncating its target could destroy a file of the user's.
    """
    held: list[int] = []
    paths = list(logins)
    for path in paths:
        with contextlib.suppress(OSError):
            held.append(_open_regular(path))
    try:
        yield
    finally:
        for fd in held:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
        for path in paths:
            with contextlib.suppress(OSError):
                fd = _open_regular(path)
                try:
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
            with contextlib.suppress(OSError):  # emptied already; a directory there is the agent's
                path.unlink()


def _open_regular(path: Path) -> int:
    """A read-write descriptor of the regular file at ``path`` (no symlink followed, no FIFO waited on)."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def strip_kept(sb: Sandbox) -> None:
    """What ``--atlante-keep`` leaves of a trial: the sandbox and the baseline repository, never the
    trial HOME (the host's config, its session logs, what is left of the copied login), the host's
    temp directory or the checks' HOMEs — each of which may hold a credential or a session log."""
    for child in list(sb.trial_dir.iterdir()) if sb.trial_dir.is_dir() else []:
        if child.name not in (sb.root.name, sb.git_dir.name):
            remove_tree(child)


def remove(sb: Sandbox) -> None:
    """Delete the trial directory, even when the agent left read-only files or directories."""
    remove_tree(sb.trial_dir)


def remove_run_dir(run_id: str) -> None:
    """Remove the run directory if it is empty (kept trials keep it alive)."""
    with contextlib.suppress(OSError):
        run_dir(run_id).rmdir()


def remove_tree(top: Path) -> None:
    if not os.path.lexists(top):
        return
    # Unlinking needs write and search permission on the parent directory, so open every directory
    # up first.  chmod follows symlinks, hence the islink guard: never touch what a link points at.
    if not top.is_symlink():
        os.chmod(top, 0o700)
        for dirpath, dirnames, _ in os.walk(top):
            for name in dirnames:
                child = os.path.join(dirpath, name)
                if not os.path.islink(child):
                    os.chmod(child, 0o700)

    def retry_after_chmod(func: Callable[..., object], path: str, _exc: object) -> None:
        os.chmod(os.path.dirname(path), 0o700)
        func(path)

    if top.is_symlink() or not top.is_dir():
        top.unlink()
    else:
        shutil.rmtree(top, onerror=retry_after_chmod)


def resolve_inside(root: Path, rel: str) -> Path | None:
    """``root/rel`` with its parent directories resolved, or ``None`` if they lead outside ``root``.

    The last component is left unresolved so callers can tell a symlink from what it points at.
    """
    candidate = root / rel
    if candidate == root:
        return root
    parent = Path(os.path.realpath(candidate.parent))
    if parent != root and root not in parent.parents:
        return None
    return parent / candidate.name


def is_inside(root: Path, path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def path_digest(root: Path, rel: str) -> str | None:
    """sha256 of the regular file at ``rel``; ``None`` when missing, a symlink or not a file."""
    path = resolve_inside(root, rel)
    if path is None:
        return None
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return None
        return sha256_file(path)
    except OSError:
        return None


def _scan_or_fail(
    sb: Sandbox, ignore_dir: str | None, objects: Path | None
) -> tuple[dict[str, Entry], dict[str, str], dict[str, str]]:
    try:
        return gitobjects.scan(sb.root, ignore_dir, objects)
    except gitobjects.ChangedWhileReading as exc:
        raise SandboxError("a sandbox file changed while the snapshot was being taken") from exc
    except OSError as exc:
        where = f": {escape_path(exc.filename)}" if isinstance(exc.filename, (str, bytes)) else ""
        raise SandboxError(f"cannot read the sandbox: {exc.strerror or exc}{where}") from exc


# --- helpers -----------------------------------------------------------------------------------


def _git(
    sb: Sandbox,
    *args: str,
    git_dir: Path | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    limit: int | None = None,
    want_stderr: bool = False,
    decode: Callable[[bytes], str] | None = None,
) -> str:
    """Run git against one of the runner's repositories (the baseline's unless ``git_dir``).

    The environment is built from scratch: no inherited GIT_* variable (GIT_DIR, GIT_INDEX_FILE,
    GIT_OBJECT_DIRECTORY, ...) and no system or global config can redirect or alter it; replace
    refs, hooks, attribute files and fsmonitor are switched off for whatever the repository's own
    config says.
    """
    full_env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CEILING_DIRECTORIES": str(sb.trial_dir.parent),
        "GIT_TERMINAL_PROMPT": "0",
        "HOME": str(sb.home),
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        **_FORCED_CONFIG,
        **(env or {}),
        "GIT_DIR": str(git_dir or sb.git_dir),
    }
    try:
        proc = subprocess.Popen(
            ["git", *args],
            cwd=sb.trial_dir,
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise SandboxError("git is not on PATH: eval needs git to show a trial's changes") from exc
    with proc:  # closes the pipes whatever happens
        try:
            if limit is None:
                out, err = proc.communicate(stdin, timeout=_GIT_TIMEOUT_S)
            else:
                # Read at most `limit` bytes, then stop git: the report keeps far less anyway.
                assert proc.stdout is not None and proc.stderr is not None
                out = proc.stdout.read(limit)
                if proc.stdout.read(1):
                    proc.kill()
                err = proc.stderr.read()
                proc.wait(timeout=_GIT_TIMEOUT_S)
                if proc.returncode < 0:
                    return (decode or _text)(out) + "\n# (diff output cut)\n"
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            raise SandboxError(
                f"git {_subcommand(args)} did not finish in {_GIT_TIMEOUT_S:.0f} s"
            ) from exc
    if proc.returncode != 0:
        message = err.decode("utf-8", errors="replace").strip()
        raise SandboxError(f"git {_subcommand(args)} failed: {message}")
    return _text(err) if want_stderr else (decode or _text)(out)


def _text(out: bytes) -> str:
    return out.decode("utf-8", errors="replace")


def _subcommand(args: tuple[str, ...]) -> str:
    """The git subcommand among ``args`` (skipping ``-c name=value`` options), for messages."""
    return next((arg for arg in args if not arg.startswith("-") and "=" not in arg), "")


def _overlay_collisions(fixture: Path, overlay: Path) -> list[str]:
    """Overlay files whose path (or a parent of it) the fixture already occupies."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(overlay):
        rel_dir = Path(dirpath).relative_to(overlay)
        linked_dirs = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in [*filenames, *linked_dirs]:
            rel = rel_dir / name
            if os.path.lexists(fixture / rel) or _blocked_by_file(fixture, rel):
                found.append(rel.as_posix())
    return sorted(found)


def _blocked_by_file(fixture: Path, rel: Path) -> bool:
    """A parent of ``rel`` exists in the fixture as something other than a directory."""
    for parent in reversed(rel.parents[:-1]):
        path = fixture / parent
        if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()):
            return True
    return False


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + "/")


def _describe_marker(before: str | None, after: str | None) -> str:
    if before is None:
        return f"git metadata {after} created by the trial (its contents are not diffed)"
    if after is None:
        return f"git metadata {before} removed by the trial"
    return f"git metadata changed from {before} to {after}"


def _require_plain_name(value: str, what: str) -> None:
    if not value or "/" in value or "\\" in value or value in (".", "..") or "\0" in value:
        raise ValueError(f"{what} {value!r} must be a plain file name")
