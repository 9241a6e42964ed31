"""SAM's shared vocabulary: plain types every layer may import (the server, the workers, the
compiler and the simulator): `geometry.Rect`; `jobs` (JobState, PriorityClass, CLASS_RANK);
`compile` (CompileKey; CompiledArtifact and its CompileSummary, with the trace's TraceInfo as
its own part); `sandbox` (SandboxOptions); `ir` (the SAM-IR graph as typed dicts: IrGraph,
IrNode, the manifest's kernels); `json_value` (JsonValue). It imports only the standard
library, so importing it costs nothing and drags in no layer (.importlinter checks it)."""
