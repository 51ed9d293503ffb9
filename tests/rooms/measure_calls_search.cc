// A measuring file that reaches into the search: the arrow the wrong way.
// Not compiled; tests/rooms/CMakeLists.txt runs the room check on it as if it
// were in tuner/measure/ and expects the check to refuse it.
#include "tuner/measure/measurer.h"
#include "tuner/search/search.h"
