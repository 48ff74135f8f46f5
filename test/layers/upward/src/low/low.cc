// The lower layer reaching up: what the check exists to refuse.
#include "high/high.h"

int Low() { return 1; }
