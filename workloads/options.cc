#include "workloads/options.h"

namespace feedtune::workloads {

std::string PathText(const FilesOptions& files) {
  if (files.path_list.empty()) return files.path;
  std::string text = "[";
  for (const std::string& entry : files.path_list) text += (text.size() > 1 ? ", " : "") + entry;
  return text + "]";
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kSynthetic: return "synthetic";
    case WorkloadKind::kFiles: return "files";
    case WorkloadKind::kCommand: return "command";
    case WorkloadKind::kNpy: return "npy";
    case WorkloadKind::kHdf5: return "hdf5";
    case WorkloadKind::kLmdb: return "lmdb";
    case WorkloadKind::kTfRecord: return "tfrecord";
    case WorkloadKind::kTar: return "tar";
  }
  return "?";
}

const char* SizeDistName(SizeDist dist) {
  switch (dist) {
    case SizeDist::kFixed: return "fixed";
    case SizeDist::kLognormal: return "lognormal";
    case SizeDist::kUniform: return "uniform";
  }
  return "?";
}

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kNone: return "none";
    case FaultKind::kThrow: return "throw";
    case FaultKind::kExit: return "exit";
    case FaultKind::kAbort: return "abort";
    case FaultKind::kSegv: return "segv";
    case FaultKind::kHang: return "hang";
  }
  return "?";
}

const char* FilesLayoutName(FilesLayout layout) {
  return layout == FilesLayout::kShards ? "shards" : "files";
}

const char* FilesIoName(FilesIo io) { return io == FilesIo::kPread ? "pread" : "mmap"; }

const char* CacheModeName(CacheMode mode) { return mode == CacheMode::kWarm ? "warm" : "cold"; }

const char* FilesDecodeName(FilesDecode decode) { return decode == FilesDecode::kNone ? "none" : "jpeg"; }

const char* CropModeName(CropMode mode) { return mode == CropMode::kRandom ? "random" : "center"; }

const char* ShardAccessName(ShardAccess access) { return access == ShardAccess::kStream ? "stream" : "random"; }

const char* TorchCostsModeName(TorchCostsMode mode) { return mode == TorchCostsMode::kAuto ? "auto" : "off"; }

}  // namespace feedtune::workloads
