// A measuring file that writes the results file itself: measure may read
// what a trial's record is made of, not the store. Not compiled; the room
// check must refuse it.
#include "results/store.h"
