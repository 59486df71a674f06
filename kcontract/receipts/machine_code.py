"""Machine-code currency: a CUDA row whose files changed stays current where its machine code did not.

The row's kernel is built twice with the toolchain in use, for every target SM it builds, by the contract's
`Builds`: from the files at the commit the row ran at (each checked against the sha256 the row recorded: its other
revision) and from the files now. Where that commit is not in HEAD's history (a rebase or squash merge removed
it), the other revision is HEAD's tree with each recorded file at the version of HEAD's history that has its sha256,
so that every clone of the branch judges the row alike; where that source lacks another use's names (a kernel
added since), the earlier unit holds only the row's own. Where every symbol of the row has the same machine code
(sassdiff/same_code.py: bytes, else normalised SASS) and every exported constant the same value on every SM, the
change did not reach what ran. This is `kcontract sass-diff`'s comparison, made for one row.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from kcontract.builds.builds import Builds
from kcontract.errors import KContractError
from kcontract.identity import file_sha256
from kcontract.sassdiff.by_content import by_content, is_ancestor
from kcontract.sassdiff.same_code import same_machine_code
from kcontract.sassdiff.revision import checkout, repo_root
from kcontract.toolchain.exports import ExportError, module_exports


@dataclasses.dataclass
class Verdict:
    """Whether the machine code is unchanged, and the phrase that says so or why it could not be told."""

    same: bool
    text: str


class MachineCode:
    """Compares rows' kernels at their commit with the kernels now; revisions are exported once per commit."""

    def __init__(self, loaded, built: Builds | None = None):
        """`built`: the session's Builds of the contract (made here where the caller has none)."""
        self.loaded = loaded
        self.base = Path(loaded.path).resolve().parent
        self.builds = built if built is not None else Builds.of(loaded)
        self._stack = contextlib.ExitStack()
        self._trees: dict[str, Path | str] = {}
        self._revisions: dict[Path, Builds] = {}  # a revision's folder -> the contract's kernels built from it
        self._where: tuple[Path, Path] | str | None = None  # the work tree and the contract's folder in it
        self._ancestors: dict[str, bool] = {}  # commit -> whether it is in HEAD's history

    def __enter__(self) -> MachineCode:
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _repo(self) -> tuple[Path, Path] | str:
        """The git work tree holding the contract and the contract's folder inside it (asked once), or why none."""
        if self._where is None:
            try:
                repo = repo_root(self.base)
                self._where = repo, self.base.relative_to(repo.resolve())
            except (KContractError, ValueError) as error:
                self._where = f"no git work tree holds {self.base}: {error}"
        return self._where

    def _old_base(self, commit: str, recorded: dict[str, str]) -> tuple[str, Path | str]:
        """The name of the row's other revision and the contract's folder in it, or why there is none."""
        found = self._repo()
        if isinstance(found, str):
            return commit[:12], found
        repo, inside = found
        if commit not in self._ancestors:
            self._ancestors[commit] = is_ancestor(repo, commit)
        known = self._ancestors[commit]
        key = commit if known else "{} by content ({})".format(commit[:12], ",".join(sorted(recorded.values())))
        shown = commit[:12] if known else f"{commit[:12]}'s files, found by content"
        if key not in self._trees:
            try:
                files = {(inside / name).as_posix(): sha for name, sha in recorded.items()}
                tree = self._stack.enter_context(checkout(repo, commit) if known else by_content(repo, files))
                self._trees[key] = tree / inside
            except (KContractError, ValueError, OSError) as error:
                why = f"commit {commit[:12]} cannot be exported: " if known else \
                    f"commit {commit[:12]} is not in HEAD's history, and "
                self._trees[key] = why + str(getattr(error, "message", error))
        return shown, self._trees[key]

    def prepare(self, asks: list[tuple]) -> None:
        """Build, in one batch now and one per earlier commit, the kernels of every comparison `compare` will be
        asked for ((kernel, ran, recorded) each), so that it compiles nothing of its own; a build that fails is
        left for `compare` to report."""
        found = [(kernel.compiled, shown, old) for kernel, ran, recorded in asks
                 for shown, old in [self._comparable(kernel, ran, recorded)] if not isinstance(old, Verdict)]
        if not found:
            return
        try:
            sms = self._sms()
            self.builds.build_each([([compiled for compiled, _, _ in found], sms)])
            for old in dict.fromkeys(old for _, _, old in found):
                self._revision(old).build_each([([compiled for compiled, _, o in found if o == old], sms)])
        except KContractError:  # `compare` says why, row by row
            pass

    def compare(self, kernel, ran: dict, recorded: dict[str, str]) -> Verdict:
        """The row's kernel built from its commit's files and from today's, compared on every target SM."""
        if kernel.compiled is None:
            return Verdict(False, "")
        shown, old = self._comparable(kernel, ran, recorded)
        if isinstance(old, Verdict):
            return old
        try:
            return self._compare(kernel.compiled, old, shown)
        except KContractError as error:
            return Verdict(False, f"machine code not compared: {error.message}")

    def _comparable(self, kernel, ran: dict, recorded: dict[str, str]) -> tuple[str, Path | Verdict]:
        """The name of the row's other revision and the contract's folder in it, or the Verdict that says why it
        cannot be compared."""
        commit = ran.get("commit")
        if not commit or ran.get("dirty") is not False:
            return commit, Verdict(False, "machine code not compared: the row ran on a tree that was no clean commit")
        shown, old = self._old_base(commit, recorded)
        if isinstance(old, str):
            return shown, Verdict(False, f"machine code not compared: {old}")
        for name, sha in recorded.items():
            path = old / name
            if not path.is_file() or file_sha256(path) != sha:
                return shown, Verdict(False, f"machine code not compared: {name} at {shown} is not the file the row "
                                             f"ran")
        return shown, old

    def _sms(self) -> list[str]:
        tool = self.builds.toolchain
        return [sm for sm in self.loaded.targets if tool.builds(sm)]

    def _revision(self, old: Path) -> Builds:
        if old not in self._revisions:
            self._revisions[old] = self.builds.other_revision(old)
        return self._revisions[old]

    def _compare(self, compiled, old: Path, shown: str) -> Verdict:
        builds, then = self.builds, self._revision(old)
        tool = builds.toolchain
        sms = self._sms()
        current, earlier = builds.build([compiled], sms), then.build([compiled], sms)
        if any(earlier.module(then.unit(compiled), sm) is None for sm in sms):  # another use's names are new
            then = then.alone(compiled)
            earlier = then.build([compiled], sms)
        symbols, exported = list(compiled.symbols.values()), then.unit(compiled).exports
        for sm in sms:
            a, b = earlier.module(then.unit(compiled), sm), current.module(builds.unit(compiled), sm)
            if a is None or b is None:
                return Verdict(False, f"machine code not compared: {compiled.source} does not compile for {sm} "
                                      f"{'now' if b is None else 'at ' + shown}")
            changed = same_machine_code(a, b, symbols, builds.cache)
            if changed:
                return Verdict(False, f"its machine code changed on {sm} ({changed[0]})")
            try:
                if module_exports(a, exported) != module_exports(b, exported):
                    return Verdict(False, f"its exported constants changed on {sm}")
            except ExportError as error:
                return Verdict(False, f"machine code not compared: {error.message}")
        if not sms:
            return Verdict(False, f"machine code not compared: {tool.id} builds none of the target SMs")
        return Verdict(True, f"SASS unchanged on {len(sms)} SMs since {shown} ({tool.id})")
