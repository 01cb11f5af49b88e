"""The pre-flight of a run through the SLURM executor (workflow/profiles/slurm, slurm-cpu).

Without it a cluster set-up error surfaces as a hundred lines of sbatch errors, retried, after
the local jobs ran (a wrong partition, `sbatch --gpus` on a cluster without GPUs), or as
`No such file or directory: 'sacct'`; a misspelt resource key (`slurm_partiton`) is not an error
at all. Checked once when the workflow loads, only when the executor is `slurm` (not inside the
jobs, whose executor is `slurm-jobstep`); each problem is one line saying what to do. No torch.
"""
from __future__ import annotations

import difflib
import shutil
import subprocess
import sys
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

CLIENT = ("sbatch", "squeue", "scancel", "sinfo")  # what the plugin and this check call
# The resource keys Snakemake and the executor plugin (snakemake-executor-plugin-slurm 2.8.0,
# pinned) read; any other is ignored without a word, so a misspelt one is refused here.
KNOWN_RESOURCES = frozenset({
    "mem", "mem_mb", "mem_mib", "disk", "disk_mb", "disk_mib", "runtime", "tmpdir",
    "gpu", "gpu_model", "gpu_manufacturer", "_cores", "_nodes",
    "slurm_partition", "slurm_account", "slurm_extra", "slurm_cluster", "slurm_logfile",
    "cluster", "clusters", "constraint", "qos", "gres", "cpus_per_task", "cpus_per_gpu",
    "mem_mb_per_cpu", "mpi", "nodes", "tasks", "tasks_per_gpu", "tasks_per_node"})
SINFO_TIMEOUT_S = 30


class PreflightError(ValueError):
    """A SLURM set-up problem; the message is one line saying what to do."""


@dataclass
class Partition:
    """A partition as `sinfo -h -o "%P|%G|%c|%m"` lists its node groups: the largest CPUs and
    memory (MB) of a node, and whether any node has a GPU."""

    name: str
    default: bool = False
    cpus: int = 0
    mem_mb: int = 0
    gpus: bool = False


@dataclass
class Job:
    """What a rule's jobs ask SLURM for (None: not a plain number, e.g. an expression)."""

    partition: str | None
    threads: Any = 1
    mem_mb: Any = None
    gpu: Any = 0
    sources: dict[str, str] = field(default_factory=dict)
    cpus_per_task: Any = None  # sent as --cpus-per-task in place of threads when set
    mem_mb_per_cpu: Any = None  # sent as --mem-per-cpu in place of mem_mb when set
    cpus_per_gpu: Any = None  # sent as --cpus-per-gpu in place of threads by a GPU job

    def asked(self) -> tuple[tuple[str, Any], tuple[str, Any]]:
        """(the CPUs, the memory in MB) a node must have for the job, each with the key it came
        from, as the pinned plugins ask sbatch (snakemake-executor-plugin-slurm 2.8.0's
        submit_string, the jobstep plugin 0.6.1's get_cpu_setting; a key of 0 counts as unset
        there): cpus_per_task (at least 1; below 0, no CPU option, so 1) over a GPU job's
        cpus_per_gpu × its GPUs (0 or below: no option) over threads; mem_mb_per_cpu × those
        CPUs over mem_mb."""
        cpus: tuple[str, Any] = ("threads", self.threads)
        if self.cpus_per_task:
            cpus = ("cpus_per_task", max(1, self.cpus_per_task)
                    if isinstance(self.cpus_per_task, int) else None)
        elif self.cpus_per_gpu and self.gpu:
            per_gpu, gpus = self.cpus_per_gpu, self.gpu
            if not isinstance(per_gpu, int) or not isinstance(gpus, int):
                cpus = ("cpus_per_gpu", None)
            else:  # 0 or below: no CPU option, so sbatch's 1
                cpus = ("cpus_per_gpu", max(1, per_gpu * gpus) if per_gpu > 0 else 1)
        mem: tuple[str, Any] = ("mem_mb", self.mem_mb)
        if self.mem_mb_per_cpu:
            per_cpu, n = self.mem_mb_per_cpu, cpus[1]
            mem = ("mem_mb_per_cpu", per_cpu * n if isinstance(per_cpu, int)
                   and isinstance(n, int) else None)
        return cpus, mem


def cli_args() -> Any:
    """The parsed arguments of the `snakemake` command line now loading this workflow
    (snakemake.cli.args_to_api's `args`: the one place the executor is known while the Snakefile
    loads), or None where there is none (the Python API)."""
    frame = sys._getframe(1)
    while frame is not None:
        args = frame.f_locals.get("args") if frame.f_code.co_name == "args_to_api" else None
        if args is not None and hasattr(args, "executor"):
            return args
        frame = frame.f_back
    return None


def plain(resource: Any) -> Any:
    """A Snakemake Resource as the profile wrote it (its raw value); numbers as int."""
    value = getattr(resource, "raw", resource)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def check_keys(default_resources: dict[str, Any], set_resources: dict[str, dict[str, Any]],
               set_threads: dict[str, Any], rules: set[str]) -> None:
    """Refuse a resource key nobody reads, and a rule name the workflow lacks, in the profile's
    default-resources, set-resources or set-threads."""
    where = [("default-resources", key) for key in default_resources]
    where += [(f"set-resources: {rule}", key) for rule, keys in set_resources.items()
              for key in keys]
    for block, key in where:
        if key not in KNOWN_RESOURCES:
            close = difflib.get_close_matches(key, KNOWN_RESOURCES, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise PreflightError(
                f"unknown resource '{key}' in the profile's {block} (it would be ignored, e.g. "
                f"the jobs sent to the default partition); {hint}the known ones: "
                f"{', '.join(sorted(k for k in KNOWN_RESOURCES if not k.startswith('_')))}")
    for block, names in (("set-resources", set_resources), ("set-threads", set_threads)):
        for rule in names:
            if rule not in rules:
                close = difflib.get_close_matches(rule, rules, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise PreflightError(f"the profile's {block} names rule '{rule}', which this "
                                     f"workflow has not{hint}; its rules: "
                                     f"{', '.join(sorted(rules))}")


def check_client() -> None:
    """Refuse a run where the Slurm client commands are not on PATH."""
    missing = [tool for tool in CLIENT if shutil.which(tool) is None]
    if missing:
        raise PreflightError(
            f"the Slurm client commands are not on PATH: {', '.join(missing)} not found; run "
            "Snakemake on the cluster's login node (some clusters need `module load slurm` "
            "first), or run locally without --workflow-profile")


def partitions() -> dict[str, Partition]:
    """The cluster's partitions, from one `sinfo` call."""
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%P|%G|%c|%m"], capture_output=True,
                              text=True, timeout=SINFO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise PreflightError(f"sinfo did not answer within {SINFO_TIMEOUT_S} s: the cluster's "
                             "controller is unreachable; check `sinfo` by hand") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise PreflightError(f"sinfo cannot reach the cluster ({said}); check `sinfo` by hand "
                             "(and SLURM_CONF where the cluster needs one)")
    found: dict[str, Partition] = {}
    for line in done.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4 or not parts[0]:
            continue
        name, gres, cpus, mem = parts
        part = found.setdefault(name.rstrip("*"), Partition(name.rstrip("*")))
        part.default |= name.endswith("*")
        part.gpus |= any(item.startswith("gpu") for item in gres.split(","))
        part.cpus = max(part.cpus, _number(cpus))
        part.mem_mb = max(part.mem_mb, _number(mem))
    return found


def _number(text: str) -> int:
    digits = text.strip().rstrip("+")
    return int(digits) if digits.isdigit() else 0


def check_jobs(jobs: dict[str, Job], found: dict[str, Partition]) -> None:
    """Refuse a rule whose partition is not the cluster's, that asks for GPUs a partition lacks,
    for CPUs by cpus_per_task or cpus_per_gpu that are not a whole number (which the plugin
    refuses only at submission), or for more CPUs or memory than the partition's largest node
    has (`Job.asked`)."""
    names = ", ".join(sorted(found)) or "none"
    default = next((p.name for p in found.values() if p.default), None)
    with_gpus = sorted(p.name for p in found.values() if p.gpus)
    for rule, job in sorted(jobs.items()):
        name = job.partition or default
        if name is None:
            raise PreflightError(f"rule {rule} names no slurm_partition and the cluster has no "
                                 f"default one; set slurm_partition in the profile's "
                                 f"default-resources to one of: {names}")
        if name not in found:
            raise PreflightError(f"slurm_partition '{name}' ({job.sources.get('partition')}) is "
                                 f"not a partition of this cluster; `sinfo -h -o %P` lists: "
                                 f"{names}; set slurm_partition in the profile to one of them")
        part = found[name]
        if isinstance(job.gpu, int) and job.gpu > 0 and not part.gpus:
            elsewhere = (f"set slurm_partition to one with GPUs ({', '.join(with_gpus)}), or"
                         if with_gpus else "this cluster has none (`sinfo -h -o %G`), so")
            raise PreflightError(f"rule {rule} asks for gpu: {job.gpu} but partition {name} has "
                                 f"no GPUs; {elsewhere} use workflow/profiles/slurm-cpu "
                                 "(gpu: 0; export WSCAT_DEVICE=cpu)")
        (cpu_key, cpus), _ = job.asked()
        if cpu_key != "threads" and not isinstance(getattr(job, cpu_key), int):
            value = getattr(job, cpu_key)  # the plugin stops the job at submission for it
            raise PreflightError(f"rule {rule}'s {cpu_key} is {value!r} ("
                                 f"{job.sources.get(cpu_key, cpu_key)}), not a whole number; "
                                 "the SLURM plugin takes only whole numbers of CPUs: give one in "
                                 "the profile")
        if over := _oversize(job, part):
            what, asked, most, unit = over
            per_cpu = (f" = {job.mem_mb_per_cpu} MB per CPU × {cpus} CPUs"
                       if what == "mem_mb_per_cpu" else
                       f" = {job.cpus_per_gpu} per GPU × {job.gpu} GPUs"
                       if what == "cpus_per_gpu" else "")
            # the later rules too big for their node, named at once (not one run per rule)
            later = [f"{other} ({more[1]} {more[3]})" for other, more in
                     ((other, _oversize(job_, found.get(job_.partition or default or "")))
                      for other, job_ in sorted(jobs.items()) if other > rule) if more]
            likewise = f", and likewise for {', '.join(later)}" if later else ""
            raise PreflightError(
                f"rule {rule} asks for {asked} {unit} ({job.sources.get(what, what)}"
                f"{per_cpu}) but the largest node of partition {name} has {most} (`sinfo -h "
                f"-p {name} -o \"%c %m\"`); lower it in the profile{likewise}")


def _oversize(job: Job, part: Partition | None) -> tuple[str, int, int, str] | None:
    """(the key, what the job asks, the node's most, the unit) of the first of its CPUs and
    memory that exceeds the largest node of `part`, or None (it fits, or sizes unknown)."""
    if part is None:
        return None
    (cpu_key, cpus), (mem_key, mem) = job.asked()
    for what, asked, most, unit in ((cpu_key, cpus, part.cpus, "CPUs"),
                                    (mem_key, mem, part.mem_mb, "MB")):
        if isinstance(asked, int) and most and asked > most:
            return what, asked, most, unit
    return None


def check(default_resources: dict[str, Any], set_resources: dict[str, dict[str, Any]],
          set_threads: dict[str, Any], rules: dict[str, dict[str, Any]],
          local_rules: Set[str] = frozenset()) -> None:
    """Every check, in order: the profile's keys, the client, the cluster's partitions. `rules`:
    each submitted rule's resources as its jobs ask for them (the profile's laid over its own;
    threads as `_cores`); `local_rules`: the rules run where Snakemake runs."""
    check_keys(default_resources, set_resources, set_threads, set(rules) | set(local_rules))
    check_client()
    jobs = {}
    for rule, asked in rules.items():
        def source(key: str) -> str:
            if key in set_resources.get(rule, {}):
                return f"the profile's set-resources: {rule}: {key}"
            if key in default_resources and default_resources[key] == asked.get(key):
                return f"the profile's default-resources: {key}"
            return f"rule {rule}'s {key}"

        threads = (f"the profile's set-threads: {rule}" if rule in set_threads
                   else f"rule {rule}'s threads")
        jobs[rule] = Job(asked.get("slurm_partition"), asked.get("_cores", 1),
                         asked.get("mem_mb"), asked.get("gpu", 0),
                         {"partition": source("slurm_partition"), "mem_mb": source("mem_mb"),
                          "threads": threads, "cpus_per_task": source("cpus_per_task"),
                          "mem_mb_per_cpu": source("mem_mb_per_cpu"),
                          "cpus_per_gpu": source("cpus_per_gpu")},
                         asked.get("cpus_per_task"), asked.get("mem_mb_per_cpu"),
                         asked.get("cpus_per_gpu"))
    check_jobs(jobs, partitions())


def problem(workflow: Any) -> tuple[str | None, bool]:
    """(the first problem of this `snakemake` run through the slurm executor, or None; whether it
    is a dry run). Nothing is checked for another executor, inside a job, or through the API."""
    args = cli_args()
    dry_run = bool(getattr(args, "dryrun", False))
    if getattr(args, "executor", None) != "slurm":
        return None, dry_run
    settings = workflow.resource_settings
    local = set(getattr(workflow, "_localrules", ()))
    rules = {rule.name: {key: plain(value) for key, value in rule.resources.items()}
             for rule in workflow.rules if rule.name not in local and not rule.norun}
    try:
        check({key: plain(value) for key, value in (settings.default_resources or {}).items()},
              {rule: {key: plain(value) for key, value in mapping.items()}
               for rule, mapping in (settings.overwrite_resources or {}).items()},
              {rule: plain(value) for rule, value in (settings.overwrite_threads or {}).items()},
              rules, {rule.name for rule in workflow.rules} - set(rules))
    except PreflightError as error:
        return str(error), dry_run
    return None, dry_run
