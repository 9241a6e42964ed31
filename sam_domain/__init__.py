"""SAM's shared vocabulary: plain types every layer may import (the server, the workers, the
compiler and the simulator). It imports nothing but the standard library's typing and
dataclasses, so importing it costs nothing and drags in no layer (.importlinter checks it)."""
