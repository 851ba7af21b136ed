"""The public datasets the shipped configs read, fetched into the layout they read
(``globalpointer data fetch SET``, docs/data-formats.md#public-datasets).

Each set's archive comes from its source, or from a mirror, a file or the folder it was unpacked into
that the user names with ``--from``; the same checks apply to all: the archive's (not a folder's) and
each file's published MD5 where the source publishes one, otherwise the number of records of each
file as the set's paper gives it.  Nothing is
written unless every file passes, a file already in place is kept (and one that differs is refused,
never replaced), and each file is renamed into ``DIR/<set>/`` whole.  A set behind a registration or a
licence is named with where to get it and where to put it; nothing is fetched for it."""
import functools
import hashlib
import io
import logging
import os
import tarfile
import zipfile
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import DataError, UserError
from ..files import atomic_output
from ..web import check_address, fetch

log = logging.getLogger("globalpointer")

# An archive larger than this is not one of these sets (the largest, MSRA, is under 20 MiB)
MAX_ARCHIVE_BYTES = 512 * 2 ** 20
# ... nor one that unpacks to more than this in all (a few hundred KB of zip can unpack to gigabytes),
MAX_EXPANDED_BYTES = 512 * 2 ** 20
# ... holds more entries than this (the sets' archives hold a handful),
MAX_ARCHIVE_MEMBERS = 10_000
# ... or a file of more lines than this (CLUENER's train.json has 10,748): splitting a file of
# newlines builds an object a line, many times the file's size
MAX_MEMBER_LINES = 1_000_000
DOWNLOAD_TIMEOUT_S = 60  # for each read: a server that stops answering
# for the whole download: a mirror that drips a byte at a time never trips the per-read timeout (the sets are
# megabytes: minutes on the slowest link that can fetch them at all)
DOWNLOAD_DEADLINE_S = 1800
# ... and at least this many bytes in every minute (about 1 KiB/s: below it the largest set, MSRA, would take
# over 5 hours), so that a mirror dripping a byte at a time stops the command in a minute, not half an hour
DOWNLOAD_MIN_RATE = (64 * 1024, 60.0)


def tsv_to_chars(content: bytes) -> bytes:
    """PaddleNLP's MSRA layout (``text_a<TAB>label`` header, then per sentence its characters and its
    tags, each joined by \\x02) as the ``chars`` format: a character and its tag per line, a blank line
    after each sentence."""
    lines = []
    for number, line in enumerate(content.decode("utf-8").splitlines(), 1):
        if number == 1 and line.startswith("text_a"):
            continue
        if not line.strip():
            continue
        columns = line.split("\t")
        characters, tags = (columns[0].split("\x02"), columns[1].split("\x02")) if len(columns) == 2 else ((), ())
        if not characters or len(characters) != len(tags):
            raise DataError(f"line {number}: expected characters and as many tags, \\x02-joined, in two "
                            f"tab-separated columns")
        lines += [f"{character}\t{tag}" for character, tag in zip(characters, tags)] + [""]
    return ("\n".join(lines) + "\n").encode("utf-8")


@dataclass(frozen=True)
class SetFile:
    name: str  # its name in DIR/<set>/, where the shipped config reads it
    member: str  # the file's name in the archive (in any of its folders)
    md5: Optional[str] = None  # the member's published checksum
    records: Optional[int] = None  # its records, parsed in ``format`` and counted where no checksum is published
    convert: Optional[Callable[[bytes], bytes]] = None  # to the layout the config reads
    format: str = "auto"  # the set's own format (data.format's names), for the records check


@dataclass(frozen=True)
class PublicSet:
    title: str
    source: str  # who publishes it, and on what terms
    url: Optional[str] = None  # None: no automatic download (see ``manual``)
    md5: Optional[str] = None  # the archive's published checksum
    files: Tuple[SetFile, ...] = ()  # what DIR/<set>/ holds, fetched or put there by hand
    manual: str = ""  # where to get it by hand
    parent: str = ""  # the folder of DIR its folder is in ("relations": DIR/relations/<set>/), "" for DIR itself


# name -> the set.  Checksums are the ones PaddleNLP's dataset loaders publish for their mirrors
# (paddlenlp/datasets/msra_ner.py, cblue.py); CMeEE's dev and test MD5s were compared with copies of
# the files here.  CLUENER's release publishes no checksum: its files are checked by their record
# counts (10,748 / 1,343 / 1,345, the CLUENER2020 paper's).
PUBLIC_SETS: Dict[str, PublicSet] = {
    "cluener": PublicSet(
        "CLUENER2020 (10 fine-grained Chinese types)",
        "the CLUE benchmark's public release; free to download, for research use",
        url="https://storage.googleapis.com/cluebenchmark/tasks/cluener_public.zip",
        files=(SetFile("train.json", "train.json", records=10748, format="cluener"),
               SetFile("dev.json", "dev.json", records=1343, format="cluener"),
               SetFile("test.json", "test.json", records=1345, format="cluener"))),
    "msra": PublicSet(
        "MSRA (SIGHAN 2006; PER, LOC, ORG)",
        "PaddleNLP's mirror of the SIGHAN 2006 bakeoff data; for research use",
        url="https://bj.bcebos.com/paddlenlp/datasets/msra_ner.tar.gz", md5="f1aadbbf328ea2fa50c9c2b56db0d31e",
        files=(SetFile("msra_train_bio.txt", "train.tsv", md5="e5b4b734ef91861384f441456ad995dd", convert=tsv_to_chars),
               SetFile("msra_test_bio.txt", "test.tsv", md5="40b26ae09b63af78ea3a91ac8b8ae303", convert=tsv_to_chars))),
    "cmeee": PublicSet(
        "CMeEE (CBLUE; nested medical entities)",
        "PaddleNLP's mirror of CBLUE (first released on Alibaba Tianchi); for research use",
        url="https://paddlenlp.bj.bcebos.com/datasets/cblue/CMeEE.zip", md5="2f21afc5d95918346b673f84eecd06b1",
        files=(SetFile("CMeEE_train.json", "CMeEE_train.json", md5="725b34819dd49a0ce028c37e4ad0a73b"),
               SetFile("CMeEE_dev.json", "CMeEE_dev.json", md5="42778760dcce7b9ada6e290f7b2a59c2"),
               SetFile("CMeEE_test.json", "CMeEE_test.json", md5="c45b3b3d79ca29776e3d9f009b7d6ee5"))),
    "conll2003": PublicSet(
        "CoNLL-2003 (English; PER, LOC, ORG, MISC)",
        "built from the Reuters RCV1 corpus, which NIST distributes under an agreement",
        files=(SetFile("train.txt", "train.txt"), SetFile("valid.txt", "valid.txt"), SetFile("test.txt", "test.txt")),
        manual="sign the Reuters corpus agreement (https://trec.nist.gov/data/reuters/reuters.html), build the "
               "CoNLL-2003 files with the shared task's scripts, and put train.txt, valid.txt and test.txt in "
               "DIR/conll2003/"),
    "duie2-subset": PublicSet(
        "The DuIE 2.0 subset (Chinese relations; 4,000 / 2,000 texts)",
        "Baidu's DuIE 2.0 (LIC 2020), released for research after registration on its site",
        files=(SetFile("train.json", "train.json", records=4000, format="duie"),
               SetFile("dev.json", "dev.json", records=2000, format="duie")), parent="relations",
        manual="register for DuIE 2.0 (https://www.luge.ai, 'DuIE2.0'), then put the first 4,000 lines of its "
               "duie_train.json and the first 2,000 of its duie_dev.json (head -n 4000, head -n 2000) in "
               "DIR/duie2-subset/ as train.json and dev.json"),
    "conll04": PublicSet(
        "CoNLL04 (English relations; Kill, Live_In, Located_In, OrgBased_In, Work_For)",
        "Roth and Yih (2004), for research use, in the split most papers use (SpERT's)",
        files=(SetFile("train.json", "train.json"), SetFile("valid.json", "valid.json"),
               SetFile("test.json", "test.json")), parent="relations",
        manual="get SpERT's JSON files of CoNLL04 (its scripts/fetch_datasets.sh downloads conll04_train.json, "
               "conll04_dev.json and conll04_test.json) and put them in DIR/conll04/ as train.json, valid.json and "
               "test.json"),
    "scierc": PublicSet(
        "SciERC (English scientific abstracts; 7 relation types)",
        "Luan et al. (2018), for research use, at sentence level in SpERT's JSON",
        files=(SetFile("train.json", "train.json"), SetFile("dev.json", "dev.json"), SetFile("test.json", "test.json")),
        parent="relations",
        manual="get SpERT's JSON files of SciERC (its scripts/fetch_datasets.sh downloads scierc_train.json, "
               "scierc_dev.json and scierc_test.json) and put them in DIR/scierc/ as train.json, dev.json and "
               "test.json"),
    "phee": PublicSet(
        "PHEE (English pharmacovigilance events; adverse and potential therapeutic events)",
        "Sun et al. (EMNLP 2022), MIT licence",
        files=(SetFile("train.json", "train.json", records=2898, format="phee"),
               SetFile("dev.json", "dev.json", records=961, format="phee"),
               SetFile("test.json", "test.json", records=968, format="phee")), parent="events",
        manual="get data/json/train.json, dev.json and test.json of PHEE's repository "
               "(https://github.com/ZhaoyueSun/PHEE) and put them in DIR/phee/"),
    "duee": PublicSet(
        "DuEE 1.0 (Chinese news events; 65 event types)",
        "Baidu's DuEE 1.0 (LIC 2020), released for research after registration on its site",
        files=(SetFile("train.json", "train.json", format="duee"), SetFile("dev.json", "dev.json", format="duee")),
        parent="events",
        manual="register for DuEE 1.0 (https://www.luge.ai, 'DuEE1.0'), then put its duee_train.json and "
               "duee_dev.json in DIR/duee/ as train.json and dev.json"),
}


DATA_ENV = "GLOBALPOINTER_DATA"  # the folder holding the sets (DIR/<set>/), for benches and tests


def incomplete(folder: str, name: str, files: Sequence[str] = ()) -> List[str]:
    """What keeps ``folder/<name>/`` from being the set (or its ``files``) as its layout reads it: each
    file missing, or with another number of records than the set's paper gives (a partial copy); []
    when complete."""
    problems = []
    for wanted in find_set(name).files:
        if files and wanted.name not in files:
            continue
        path = os.path.join(folder, find_set(name).parent, name, wanted.name)
        if not os.path.isfile(path):
            problems.append(f"{path} is missing")
        elif wanted.records is not None:
            with open(path, "rb") as handle:
                records = sum(1 for line in handle if line.strip())
            if records != wanted.records:
                problems.append(f"{path} has {records} records, not {wanted.records}")
    return problems


def fetch_hint(path: str) -> str:
    """For a missing file where a public set's layout puts one of its files (``DIR/<set>/<file>``):
    the command that fetches it (or where the set comes from); "" otherwise."""
    folder, name = os.path.split(os.path.abspath(path))
    chosen = PUBLIC_SETS.get(os.path.basename(folder))
    if chosen is None or name not in {wanted.name for wanted in chosen.files}:
        return ""
    target = os.path.relpath(os.path.dirname(folder))
    where = "" if target == "data" else f" --to {target}"
    set_name = os.path.basename(folder)
    if chosen.url is None:
        return f"; a file of the public set {set_name}, which is not fetched: {chosen.manual.replace('DIR/', target + '/')}"
    return f"; a file of the public set {set_name}: fetch it with globalpointer data fetch {set_name}{where}"


def find_set(name: str) -> PublicSet:
    if name not in PUBLIC_SETS:
        raise UserError(f"no public set {name!r}: the sets are {', '.join(PUBLIC_SETS)}")
    return PUBLIC_SETS[name]


def download(location: str) -> bytes:
    """The bytes at ``location``: an http(s) URL (within DOWNLOAD_DEADLINE_S and MAX_ARCHIVE_BYTES), or a
    file already downloaded."""
    if not location.lower().startswith(("http://", "https://")):
        if not os.path.isfile(location):
            raise UserError(f"--from {location}: no such file or folder, and not an http(s) URL")
        with open(location, "rb") as source:
            return _bounded(source, location)
    check_address(location, "--from")
    log.info("downloading %s", location)
    return fetch(location, DOWNLOAD_TIMEOUT_S, MAX_ARCHIVE_BYTES, deadline_s=DOWNLOAD_DEADLINE_S,
                 min_rate=DOWNLOAD_MIN_RATE, what_to_check="the URL, or download the archive yourself (a browser, or a mirror) and pass the "
                               "file or the mirror's URL with --from")


def _bounded(stream, location: str, budget: Optional[List[int]] = None) -> bytes:
    """The stream's bytes, within MAX_ARCHIVE_BYTES (an archive) or what is left of ``budget`` (the
    files unpacked from one archive together, taken from it)."""
    limit = MAX_ARCHIVE_BYTES if budget is None else budget[0]
    content = stream.read(limit + 1)
    if len(content) > limit:
        what = "bytes" if budget is None else "bytes unpacked from the archive in all"
        raise DataError(f"{location}: more than {limit:,} {what}, which none of these sets is; nothing was written")
    if budget is not None:
        budget[0] -= len(content)
    return content


def archive_members(location: str, content: bytes, wanted: Sequence[str]) -> Tuple[Dict[str, bytes], List[str]]:
    """The regular files of a zip or tar(.gz) archive whose base names are ``wanted`` (``collected``)."""
    try:
        if zipfile.is_zipfile(io.BytesIO(content)):
            with zipfile.ZipFile(io.BytesIO(content)) as archive:
                entries = [info for info in archive.infolist() if not info.is_dir()]
                return collected(location, ((info.filename, functools.partial(archive.open, info))
                                            for info in entries), wanted)
        with tarfile.open(fileobj=io.BytesIO(content), mode="r:*") as archive:
            # one entry at a time: a tar's entry list is only known by reading it
            return collected(location, ((info.name, functools.partial(archive.extractfile, info))
                                        for info in archive if info.isfile()), wanted)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        raise DataError(f"{location}: neither a zip nor a tar archive that can be read ({error}); the download "
                        f"may have been cut short: fetch it again") from None


def folder_members(location: str, wanted: Sequence[str]) -> Tuple[Dict[str, bytes], List[str]]:
    """The files under the folder ``location`` (an archive unpacked) whose base names are ``wanted``."""
    def entries():
        for root, folders, files in os.walk(location):
            folders.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                if os.path.isfile(path):
                    yield os.path.relpath(path, location), functools.partial(open, path, "rb")
    return collected(location, entries(), wanted)


def collected(location: str, entries: Iterable[Tuple[str, Callable]], wanted: Sequence[str]
              ) -> Tuple[Dict[str, bytes], List[str]]:
    """Of ``entries`` (path, a function opening it), those whose base names are ``wanted``, read within
    ``MAX_EXPANDED_BYTES`` together, and the base names of all of them (macOS's ``__MACOSX`` copies left
    out), for the message when one is missing.  More than ``MAX_ARCHIVE_MEMBERS`` entries, or two files
    for one wanted name, are refused."""
    members: Dict[str, bytes] = {}
    paths: Dict[str, str] = {}
    names: List[str] = []
    budget = [MAX_EXPANDED_BYTES]
    for path, opener in entries:
        if path.startswith("__MACOSX/"):
            continue
        names.append(os.path.basename(path))
        _check_entries(location, len(names))
        name = names[-1]
        if name not in wanted:
            continue
        if name in members:
            raise DataError(f"{location}: two files for {name} ({paths[name]} and {path}); which is the set's cannot "
                            f"be told: nothing was written")
        with opener() as member:
            members[name], paths[name] = _bounded(member, f"{location}!{path}", budget), path
    return members, names


def _check_entries(location: str, count: int) -> None:
    if count > MAX_ARCHIVE_MEMBERS:
        raise DataError(f"{location}: more than {MAX_ARCHIVE_MEMBERS:,} entries, which none of these sets' archives "
                        f"has; nothing was written")


def checked_files(name: str, chosen: PublicSet, location: str, content: Optional[bytes]
                  ) -> List[Tuple[SetFile, bytes]]:
    """Each file of the set with the content to write, after the archive's and the files' checks.
    ``content``: the archive's bytes, or None where ``location`` is the folder it was unpacked into
    (then each file's own checks alone)."""
    wanted_names = [wanted.member for wanted in chosen.files]
    if content is None:
        members, names = folder_members(location, wanted_names)
    else:
        if os.path.basename(location) in wanted_names:
            raise UserError(f"--from {location} is one of {name}'s files, not its archive: pass the archive, or the "
                            f"folder that holds all of {', '.join(wanted_names)}")
        if chosen.md5 and hashlib.md5(content).hexdigest() != chosen.md5:
            raise DataError(f"{location}: MD5 {hashlib.md5(content).hexdigest()}, but {name}'s archive has "
                            f"{chosen.md5}: the download is damaged or not this set's; nothing was written")
        members, names = archive_members(location, content, wanted_names)
    files = []
    for wanted in chosen.files:
        if wanted.member not in members:
            raise DataError(f"{location}: no {wanted.member} in the archive (it holds "
                            f"{', '.join(sorted(names)) or 'nothing'}); nothing was written")
        member = members[wanted.member]
        if wanted.md5 and hashlib.md5(member).hexdigest() != wanted.md5:
            raise DataError(f"{location}: {wanted.member} has MD5 {hashlib.md5(member).hexdigest()}, not the "
                            f"published {wanted.md5}; nothing was written")
        if wanted.records is not None:
            found = _parsed_records(location, wanted, member)
            if found != wanted.records:
                raise DataError(f"{location}: {wanted.member} has {found} records, but {name}'s has "
                                f"{wanted.records}; the download is damaged or another version: nothing was written")
        try:
            files.append((wanted, wanted.convert(member) if wanted.convert else member))
        except DataError as error:
            raise DataError(f"{location}: {wanted.member}: {error}") from None
    return files


def _parsed_records(location: str, wanted: SetFile, member: bytes) -> int:
    """The records of an archive's file read as the set's readers read it (in ``wanted.format``): lines
    that only count as many would pass a line count.  A file of more lines than the set's files ever
    have is refused before it is split."""
    from .readers import records_of_text

    where = f"{location}!{wanted.member}"
    if member.count(b"\n") > MAX_MEMBER_LINES:
        raise DataError(f"{where}: more than {MAX_MEMBER_LINES:,} lines, which no file of these sets has; nothing "
                        f"was written")
    try:
        return len(records_of_text(where, member.decode("utf-8"), wanted.format, "raise", 0))
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: not UTF-8 text ({error.reason} at byte {error.start}); nothing was written") from None
    except DataError as error:
        raise DataError(f"{error}; the download is damaged or not this set's: nothing was written") from None


def fetch_set(name: str, directory: str = "data", location: Optional[str] = None) -> List[str]:
    """Fetch, check and lay out the public set ``name`` in ``directory/name/``; the paths of its files.
    ``location`` (a mirror's URL or a downloaded file) replaces the source; the checks stay."""
    chosen = find_set(name)
    target = os.path.join(directory, name)
    if chosen.url is None:
        raise UserError(f"{name} cannot be downloaded automatically ({chosen.source}): "
                        f"{chosen.manual.replace('DIR/', os.path.join(directory, chosen.parent, ''))}")
    location = location or chosen.url
    files = checked_files(name, chosen, location, None if os.path.isdir(location) else download(location))
    paths = [os.path.join(target, wanted.name) for wanted, _ in files]
    for path, (_, content) in zip(paths, files):
        if os.path.lexists(path) and not (os.path.isfile(path) and open(path, "rb").read() == content):
            raise UserError(f"{path} is there already and differs from {name}'s; move it away to fetch the set "
                            f"(nothing was written)")
    for path, (_, content) in zip(paths, files):
        if os.path.isfile(path):
            log.info("%s: there already, the same", path)
            continue
        with atomic_output(path, binary=True) as out:
            out.write(content)
    return paths


def describe_sets() -> str:
    """One paragraph per set: what it is, where it comes from, and whether ``fetch`` gets it."""
    rows = []
    for name, chosen in PUBLIC_SETS.items():
        how = (f"fetch: {chosen.url}" if chosen.url else
               "by hand: " + chosen.manual.replace("DIR/", os.path.join("data", chosen.parent, "")))
        rows.append(f"{name}: {chosen.title}\n  {chosen.source}\n  files: {', '.join(f.name for f in chosen.files)}"
                    f"\n  {how}")
    return "\n".join(rows)
