// DeviceOptions: which device backend runs the training-loop side of a trial
// and how long its model step takes. Plain values, no behaviour.
#pragma once

#include <cstdint>

namespace feedtune::device {

enum class BackendChoice { kAuto, kCuda, kHostSim };

struct HostSimOptions {
  double h2d_gbps_pinned = 25;    // modelled host-to-device bandwidth from pinned memory
  double h2d_gbps_pageable = 8;   // ... and from pageable memory
};

struct DeviceOptions {
  BackendChoice backend = BackendChoice::kAuto;
  int64_t step_us = 20000;        // model compute per batch
  int sync_every_steps = 1;       // host waits for the device every N steps; 0 = never
  bool prefetch_to_device = false;
  // With sweep.ranks > 1: the ranks meet at a barrier after every step, as
  // DDP's all-reduce makes them, so the slowest rank sets the node's pace.
  bool rank_barrier = true;
  HostSimOptions host_sim;
};

const char* BackendChoiceName(BackendChoice choice);

}  // namespace feedtune::device
