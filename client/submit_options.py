"""The options of `sam submit`, declared once for both of its paths: click's command
(commands/submit.py, with commands/options.py for --url/--token) builds its options from these,
and the fast path (fastpath.py) parses a command line with them. Plain tuples, no imports: the
fast path reads this module on every submit and must not pull in click (or even typing).

Each entry: (option names, parameter name, metavar, help). metavar None: a flag; "": a value
whose metavar click derives from its type (commands/submit.py gives --config and --output theirs).
"""

from __future__ import annotations

CONNECTION_OPTIONS = (
    (("--url",), "url", "URL", "Server URL (else SAM_URL, else the config file)."),
    (("--token",), "token", "TOKEN", "API token (else SAM_TOKEN, else the config file)."),
)

SUBMIT_OUTPUTS = ("text", "json", "yaml")

SUBMIT_OPTIONS = (
    (
        ("--wait",),
        "wait",
        None,
        "Follow the job (log on stderr); exit 0 only if it succeeds.",
    ),
    (
        ("--config",),
        "config_file",
        "",
        "A cerebras_config.yaml whose keys (target_device, num_epochs, checkpoint_dir, ...) "
        "fill the job's compile_options, run_options and data_loading.",
    ),
    (("--parsable",), "parsable", None, "Print only the job id."),
    (
        ("--dry-run",),
        "dry_run",
        None,
        "Validate on the server and print the normalized spec and the project's files.",
    ),
    (
        ("-o", "--output"),
        "output",
        "",
        "text: a sentence (the spec as YAML with --dry-run); json/yaml: the API object.",
    ),
    (
        ("--idempotency-key",),
        "idempotency_key",
        "KEY",
        "Reuse a key to make resubmission safe (default: random).",
    ),
    (
        ("--allow-outside",),
        "allow_outside",
        None,
        "Upload named files from outside the job file's folder (each is listed on stderr).",
    ),
    (
        ("--no-project",),
        "no_project",
        None,
        "Send only the files the job file names, not its folder (the job's project).",
    ),
    (
        ("--array", "-a"),
        "array",
        "INDICES",
        "A job array: 0-99, 1,3,5-9, 0-20:2; %N caps tasks running at once (0-99%10). "
        "${SAM_ARRAY_TASK_ID} in the spec's values becomes each task's index.",
    ),
    (
        ("--dependency", "-d"),
        "dependency",
        "DEPS",
        "Start only after other jobs: afterok:ID[:ID],afterany:ID,afternotok:ID,singleton.",
    ),
    (("--hold", "-H"), "hold", None, "Submit held (`sam release` lets it run)."),
    (
        ("--kill-invalid-depend",),
        "kill_invalid_depend",
        None,
        "Cancel the job if its dependency can never be met (else it waits: "
        "DependencyNeverSatisfied).",
    ),
)
