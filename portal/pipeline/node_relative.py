"""Properties a flow sets that name something inside its source data node.

The node gives the root (``source.files.path``); a flow narrows it with a folder below it
(``source.files.folder``: an upstream flow's output, ``<flowGroup>/<flowName>``), folder names, a file-name
glob and Spark reader options. Each is refused at save when it is not a plain relative name
(``schema.user_property_problems``) and again on the worker (``orchestration.worker.guard``), and the
files source resolves what they reach to real paths inside the node before Spark sees them
(``sources.files``). Reader options pass through an allow-list: Spark's file readers take options
that open files or URLs of their own (``avroSchemaUrl``, ``basePath``, ``path``), and a new Spark
release may add more, so only options known to shape parsing alone get through.
"""

from __future__ import annotations

from collections.abc import Mapping

from portal.pipeline.confinement import ConfinementError, real_inside, relative_name_problem

FOLDER_LIST_KEYS = frozenset({"source.files.datasets"})
# A folder below the node's root read instead of the root: an upstream flow's own output.
SUBFOLDER_KEYS = frozenset({"source.files.folder"})
GLOB_KEYS = frozenset({"source.files.glob"})
OPTION_PREFIX = "source.files.option."

# Spark's CSV, JSON, Parquet, ORC and Avro reader options that only shape how bytes are parsed
# (lower-case: Spark reads option names case-insensitively).
READER_OPTIONS = frozenset(
    name.lower()
    for name in (
        # CSV
        "sep", "delimiter", "encoding", "charset", "quote", "escape", "comment", "header",
        "inferSchema", "preferDate", "enforceSchema", "ignoreLeadingWhiteSpace",
        "ignoreTrailingWhiteSpace", "nullValue", "nanValue", "positiveInf", "negativeInf",
        "dateFormat", "timestampFormat", "timestampNTZFormat", "maxColumns", "maxCharsPerColumn",
        "mode", "columnNameOfCorruptRecord", "multiLine", "charToEscapeQuoteEscaping",
        "samplingRatio", "emptyValue", "locale", "lineSep", "unescapedQuoteHandling",
        # JSON
        "primitivesAsString", "prefersDecimal", "allowComments", "allowUnquotedFieldNames",
        "allowSingleQuotes", "allowNumericLeadingZeros", "allowBackslashEscapingAnyCharacter",
        "allowUnquotedControlChars", "dropFieldIfAllNull", "allowNonNumericNumbers", "timeZone",
        # Parquet, ORC, Avro
        "mergeSchema", "datetimeRebaseMode", "int96RebaseMode", "avroSchema",
        "positionalFieldMatching", "enableStableIdentifiersForUnionType",
        # every file source
        "pathGlobFilter", "modifiedBefore", "modifiedAfter", "ignoreCorruptFiles",
        "ignoreMissingFiles",
    )
)  # fmt: skip
# Options whose value is a file: a path relative to the source node, read only inside it.
READER_PATH_OPTIONS = frozenset({"avroschemaurl"})


def problems(properties: Mapping[str, object]) -> list[str]:
    """What a flow (or template) may not say about the inside of its source node."""
    found = []
    for key, value in sorted(properties.items(), key=lambda item: str(item[0])):
        if not isinstance(key, str) or not isinstance(value, str) or "${" in value:
            continue
        if key in FOLDER_LIST_KEYS:
            for name in (part for part in value.split(",") if part.strip()):
                reason = relative_name_problem(name)
                if reason:
                    found.append(
                        f"{key!r}: '{name.strip()}' {reason}; give folder names inside the data node"
                    )
        elif key.startswith(OPTION_PREFIX):
            found.extend(_option_problems(key, value))
        elif value.strip():
            found.extend(_path_problems(key, value.strip()))
    return found


def _path_problems(key: str, value: str) -> list[str]:
    """A folder below the node (a path) or a file-name glob (one name)."""
    if key in SUBFOLDER_KEYS and (reason := relative_name_problem(value, folders=True)):
        return [f"{key!r}: '{value}' {reason}; give a folder inside the data node"]
    if key in GLOB_KEYS and (reason := relative_name_problem(value)):
        return [f"{key!r}: '{value}' {reason}; the glob matches file names only"]
    return []


def _option_problems(key: str, value: str) -> list[str]:
    option = key[len(OPTION_PREFIX) :].lower()
    if option in READER_PATH_OPTIONS:
        reason = relative_name_problem(value, folders=True)
        return (
            [f"{key!r}: '{value.strip()}' {reason}; give a file inside the source data node"]
            if reason
            else []
        )
    if option in READER_OPTIONS:
        return []
    return [
        f"{key!r} is not a reader option Flowport passes to Spark (it may open files or URLs of its "
        "own); see docs/pipeline.md for the options allowed"
    ]


def reader_options(properties: Mapping[str, str], root: str) -> dict[str, str]:
    """The ``source.files.option.*`` options for Spark's reader, a file option resolved to its real
    path inside ``root``; ConfinementError for anything :func:`problems` refuses or a file that
    leads out of the node."""
    given = {k: v for k, v in properties.items() if k.startswith(OPTION_PREFIX)}
    refused = problems(given)
    if refused:
        raise ConfinementError("; ".join(refused))
    options = {}
    for key, value in given.items():
        name = key[len(OPTION_PREFIX) :]
        if name.lower() in READER_PATH_OPTIONS:
            value = real_inside(f"{root.rstrip('/')}/{value.strip()}", root, key)
        options[name] = value
    return options
