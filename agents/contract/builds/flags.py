"""The configure flags and CFLAGS a source build may use: allow-lists.

A build's flags come from any lab user and reach the agent's compiler, so only
the flags database engineers use for benchmarks and debugging are accepted,
each matched whole against a pattern with a safe character set: no shell
metacharacters (make passes CFLAGS through a shell), no paths on the build
host, nothing that makes the compiler or linker run or load another program
(-wrapper, -B, -specs, -fplugin, @file, -Wl,...). The lab checks the flags
when a build is saved or an experiment scheduled, the agent again before it
builds; docs/contracts.md lists them.
"""

import re

from agents.contract.errors import JobError

NUMBER = r"[0-9]{1,6}"
# A CPU name (-march=x86-64-v3, -mcpu=neoverse-n1, -march=armv8.2-a+crc).
CPU_NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,47}"

# Switches without a value, as PostgreSQL's `configure --help` lists them.
CONFIGURE_SWITCHES = frozenset(
    {
        "--enable-debug",
        "--enable-cassert",
        "--enable-dtrace",
        "--enable-profiling",
        "--enable-depend",
        "--enable-injection-points",
        "--disable-spinlocks",
        "--disable-atomics",
        "--disable-largefile",
        "--disable-rpath",
        "--disable-thread-safety",
        "--with-openssl",
        "--with-lz4",
        "--with-zstd",
        "--with-icu",
        "--with-llvm",
        "--with-libxml",
        "--with-liburing",
        "--with-libnuma",
        "--without-readline",
        "--without-zlib",
        "--without-icu",
    }
)
# Options with a value: the value must match its pattern whole (configure checks the range).
CONFIGURE_OPTIONS = {
    "--with-blocksize": NUMBER,
    "--with-wal-blocksize": NUMBER,
    "--with-segsize": NUMBER,
    "--with-segsize-blocks": NUMBER,
    "--with-wal-segsize": NUMBER,
    "--with-pgport": NUMBER,
    "--with-ssl": "openssl",
    "--with-extra-version": r"[A-Za-z0-9._+-]{1,32}",
}
# Set by the agent, which decides where a build goes.
RESERVED_FLAGS = ("--prefix", "--exec-prefix", "--bindir", "--libdir", "--datadir", "--srcdir")

CFLAGS_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (
        r"-O[0-3sg]|-Ofast",
        r"-g|-g[0-3]|-ggdb[0-3]?|-gdwarf(-[2-5])?",
        rf"-m(arch|tune|cpu)={CPU_NAME}",
        r"-m(no-)?(avx2?|avx512[a-z]{1,12}|sse4(\.[12])?|popcnt|bmi2?|lzcnt|crc32|aes|pclmul|fma)",
        r"-f(no-)?omit-frame-pointer|-mno-omit-leaf-frame-pointer",
        r"-flto(=auto|=[0-9]{1,3})?|-fno-lto",
        r"-f(no-)?(unroll-loops|inline|inline-functions|strict-aliasing|tree-vectorize|plt"
        r"|semantic-interposition|common|builtin|stack-protector(-strong|-all)?)",
        r"-fwrapv|-fcf-protection(=none|=full)?|-fexcess-precision=(standard|fast)",
        r"-fsanitize=[a-z][a-z,-]{0,99}|-fno-sanitize-recover(=all)?",
        r"-D[A-Za-z_][A-Za-z0-9_]{0,63}(=[A-Za-z0-9_.+-]{0,64})?",
        r"-U[A-Za-z_][A-Za-z0-9_]{0,63}",
        # Warnings: a name of two or more characters, so never -Wl, -Wa or -Wp (pass-through).
        r"-W(no-)?[a-z][a-z0-9-]+(=[0-9]{1,3})?",
        r"-pipe|-std=(c|gnu)(99|11|17|2x|23)",
    )
)
CFLAG_CHARACTER = re.compile(r"[A-Za-z0-9=,._+-]")
# What each refused family does, for a message that says why.
RUNS_PROGRAMS = ("-wrapper", "-B", "-specs", "--specs", "-fplugin", "@", "-Wl", "-Wa", "-Wp")
MAX_CFLAGS_LENGTH = 500


def _invalid(field: str, message: str) -> JobError:
    return JobError("invalid_spec", message, field=f"postgres.build.{field}")


def allowed_configure_flags() -> str:
    """The configure allow-list as one line, for error messages and pages."""
    valued = [
        f"{name}=N" if value == NUMBER else f"{name}=..."
        for name, value in CONFIGURE_OPTIONS.items()
    ]
    return ", ".join([*sorted(CONFIGURE_SWITCHES), *valued])


def check_configure_flag(flag: object, field: str) -> str:
    """`flag` if the allow-list has it, else JobError naming `field` and the fix."""
    if not isinstance(flag, str) or not re.fullmatch(r"--[a-z][a-z0-9-]*(=\S*)?", flag):
        raise _invalid(field, f"{flag!r} is not a configure flag: write --name or --name=value")
    name, has_value, value = flag.partition("=")
    if name in RESERVED_FLAGS:
        raise _invalid(field, f"{flag} is set by the agent: remove it")
    pattern = CONFIGURE_OPTIONS.get(name)
    if (pattern is None and not has_value and flag in CONFIGURE_SWITCHES) or (
        pattern is not None and re.fullmatch(pattern, value)
    ):
        return flag
    raise _invalid(
        field,
        f"{flag} is not on the agents' list of configure flags (paths on the build host and "
        f"compiler settings are refused); use one of {allowed_configure_flags()}",
    )


def check_cflags(cflags: object) -> str | None:
    """CFLAGS whose every space-separated flag the allow-list has, else JobError on `cflags`."""
    if cflags in (None, ""):
        return None
    if not isinstance(cflags, str) or len(cflags) > MAX_CFLAGS_LENGTH:
        raise _invalid(
            "cflags",
            f"must be one line of compiler flags, e.g. -O2 -g, of at most {MAX_CFLAGS_LENGTH} "
            "characters",
        )
    for flag in cflags.split(" "):
        if flag:
            _check_cflag(flag)
    return cflags


def _check_cflag(flag: str) -> None:
    """Each flag matches an allowed pattern whole; a refusal says why and what to use."""
    if any(pattern.fullmatch(flag) for pattern in CFLAGS_PATTERNS):
        return
    wrong = [char for char in flag if not CFLAG_CHARACTER.fullmatch(char)]
    if flag.startswith(RUNS_PROGRAMS):
        reason = "it makes the compiler run or load another program"
    elif wrong:
        reason = (
            f"{wrong[0]!r} is not allowed: flags are letters, digits and = , . _ + - separated "
            "by single spaces (no quotes, tabs, paths or shell characters)"
        )
    else:
        reason = "it is not on the agents' list of compiler flags"
    raise _invalid(
        "cflags",
        f"{flag[:60]} is refused: {reason}; use -O0..-O3, -Os, -Og, -g, -march=/-mtune=/-mcpu=CPU, "
        "-fno-omit-frame-pointer, -flto, -DNAME[=VALUE], -UNAME, -fsanitize=LIST or -W<warning>",
    )
