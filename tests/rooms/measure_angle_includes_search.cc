// A measuring file that reaches into the search with angle brackets, which
// the include path resolves as it does quotes. Not compiled; the room check
// must refuse it as it refuses measure_calls_search.cc.
#include <tuner/search/search.h>
