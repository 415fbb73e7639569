// The module is its header's inline function; SwiftPM builds a C target from a source file.
#include "CSluiceCacheHints.h"
