"""Which files of a project folder `sam submit` sends: .samignore in gitignore's syntax, the
built-in ignores, and the refusals (symlinks out, device files, FIFOs), each with its message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from client.errors import JobSpecError
from client.ignore import IgnoreRules
from client.project import list_project


@pytest.mark.parametrize(
    ("lines", "path", "is_dir", "ignored"),
    [
        (["*.log"], "run.log", False, True),
        (["*.log"], "deep/er/run.log", False, True),  # no slash: any depth
        (["*.log"], "run.log.txt", False, False),
        (["/build"], "build", True, True),  # anchored to the project folder
        (["/build"], "src/build", True, False),
        (["data/raw"], "data/raw", True, True),  # a middle slash anchors too
        (["data/raw"], "x/data/raw", True, False),
        (["out/"], "out", True, True),  # a trailing slash: folders only
        (["out/"], "out", False, False),
        (["**/cache"], "a/b/cache", True, True),
        (["logs/**"], "logs/a/b.txt", False, True),
        (["a/**/z"], "a/z", False, True),
        (["a/**/z"], "a/b/c/z", False, True),
        (["file?.txt"], "file1.txt", False, True),
        (["file?.txt"], "file10.txt", False, False),
        (["[abc].py"], "b.py", False, True),
        (["[!abc].py"], "b.py", False, False),
        (["*.npy", "!keep.npy"], "keep.npy", False, False),  # the last match wins
        (["*.npy", "!keep.npy", "keep.npy"], "keep.npy", False, True),
        (["\\#notes"], "#notes", False, True),
        ([], "x/__pycache__", True, True),  # built in
        ([], "m.pyc", False, True),
        ([], ".venv", True, True),
        ([], ".git", True, True),
        ([], ".gitignore", False, False),
    ],
)
def test_samignore_follows_gitignore(
    lines: list[str], path: str, is_dir: bool, ignored: bool
) -> None:
    assert IgnoreRules(lines).ignored(path, is_dir) is ignored


def _tree(root: Path) -> Path:
    for rel, text in {
        "job.yaml": "name: x\n",
        "model.py": "x = 1\n",
        "nets/__init__.py": "",
        "nets/layers.py": "y = 2\n",
        "nets/__pycache__/layers.cpython-311.pyc": "junk",
        "data/big.npy": "\x93NUMPY",
        "logs/run.log": "noise",
        ".git/HEAD": "ref",
        ".samignore": "# scratch\nlogs/\n*.tmp\n",
        "a.tmp": "t",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "data" / "bin.dat").write_bytes(bytes(range(256)))  # binary files are sent too
    return root


def test_a_project_is_every_file_but_the_ignored(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (root / "link.py").symlink_to(root / "model.py")  # a link inside the folder is followed
    files = {f.path: f.size for f in list_project(root)}
    assert sorted(files) == [
        ".samignore",
        "data/big.npy",
        "data/bin.dat",
        "job.yaml",
        "link.py",
        "model.py",
        "nets/__init__.py",
        "nets/layers.py",
    ]
    assert files["data/bin.dat"] == 256


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_nested_samignore_files_apply_below_their_folder_as_gitignore(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "p",
        {
            ".samignore": "*.tmp\n!keep.tmp\nscratch/\n**/cache/\n",
            "job.yaml": "",
            "a.tmp": "",
            "keep.tmp": "",
            # data/.samignore: relative to data/, and it wins over the project's
            "data/.samignore": "/raw/\n*.csv\n!big.csv\n!*.tmp\nkeep.tmp\n",
            "data/raw/x.npy": "",  # anchored to data/: left out
            "data/sub/raw/y.npy": "",  # not data/raw: sent
            "data/rows.csv": "",
            "data/big.csv": "",  # taken back in by data/.samignore
            "data/sub/deep.csv": "",  # data/'s *.csv reaches below
            "data/b.tmp": "",  # data/'s !*.tmp wins over the project's *.tmp
            "data/keep.tmp": "",  # ... and data/'s later keep.tmp wins over its !*.tmp
            "src/raw/z.npy": "",  # data/'s rules do not reach here
            "src/c.tmp": "",
            "src/cache/k.bin": "",  # **/cache/ from the top, a folder at any depth
            "src/cache.txt": "",  # cache/ is folders only
            "scratch/.samignore": "!*\n",  # a left-out folder is not read: nothing returns
            "scratch/notes.txt": "",
            "docs/.samignore": "# only a comment\n\n",
            "docs/guide.md": "",
        },
    )
    sent = [f.path for f in list_project(root)]
    assert sent == [
        ".samignore",
        "data/.samignore",
        "data/b.tmp",
        "data/big.csv",
        "data/sub/raw/y.npy",
        "docs/.samignore",
        "docs/guide.md",
        "job.yaml",
        "keep.tmp",
        "src/cache.txt",
        "src/raw/z.npy",
    ]


def test_a_nested_samignore_can_take_back_a_built_in_ignore(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "p",
        {"job.yaml": "", "vendor/.samignore": "!*.pyc\n", "vendor/m.pyc": "", "top.pyc": ""},
    )
    assert [f.path for f in list_project(root)] == ["job.yaml", "vendor/.samignore", "vendor/m.pyc"]


def test_a_symlink_out_of_the_project_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (tmp_path / "secret.txt").write_text("key")
    (root / "nets" / "creds").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(JobSpecError, match=r"nets/creds: a symlink to .*secret.txt, outside"):
        list_project(root)
    (root / ".samignore").write_text("creds\n")  # unless .samignore leaves it out
    assert "nets/creds" not in {f.path for f in list_project(root)}


def test_a_fifo_is_refused_with_what_to_do(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    os.mkfifo(root / "pipe")
    with pytest.raises(JobSpecError, match="pipe: a FIFO, not a regular file.*samignore"):
        list_project(root)


def test_a_device_file_linked_in_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (root / "null").symlink_to("/dev/null")  # leads out of the folder: refused as such
    with pytest.raises(JobSpecError, match="null: a symlink to /dev/null, outside"):
        list_project(root)


def test_a_name_with_a_backslash_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (root / "a\\b.py").write_text("")
    with pytest.raises(JobSpecError, match="backslash"):
        list_project(root)


def test_a_device_file_in_the_project_is_refused(tmp_path: Path) -> None:
    import stat

    root = _tree(tmp_path / "p")
    try:
        os.mknod(root / "tty0", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device file needs CAP_MKNOD")
    with pytest.raises(JobSpecError, match="tty0: a device file, not a regular file"):
        list_project(root)
