#include "results/sqlite.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

namespace feedtune::results {

std::string ErrorText(const std::string& path, std::string_view operation, int rc, std::string_view message) {
  std::string text = path + ": " + std::string(operation) + ": " + std::string(message);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      text += " (another process kept the results file locked for more than " +
              std::to_string(kBusyTimeoutMs / 1000) +
              " s; wait for it to finish or use another --db path)";
      break;
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      text +=
          " (check that the file and its folder exist and are writable, or use another --db "
          "path)";
      break;
    case SQLITE_FULL:
      text += " (the disk is full)";
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      text += " (the file is damaged or not a feedtune results file; use another --db path)";
      break;
    default:
      break;
  }
  return text;
}

void ThrowSqlite(sqlite3* db, const std::string& path, std::string_view operation, int rc) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw StoreError(ErrorText(path, operation, rc, message), rc);
}

void Exec(sqlite3* db, const std::string& path, std::string_view operation, const char* sql) {
  char* raw_message = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &raw_message);
  if (rc != SQLITE_OK) {
    // The message exec hands back belongs to this SQL; errmsg may not, after ROLLBACK.
    std::string message = raw_message != nullptr ? raw_message : sqlite3_errstr(rc);
    sqlite3_free(raw_message);
    throw StoreError(ErrorText(path, operation, rc, message), rc);
  }
}

void EnableWal(sqlite3* db, const std::string& path) {
  // Switching modes needs the file to itself. While another connection's first
  // open is mid-migration, sqlite answers BUSY at once instead of calling the
  // busy handler (waiting while holding our read lock could deadlock), so the
  // wait is done here, with the same limit.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  while (true) {
    const int rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
      ThrowSqlite(db, path, "enable WAL", rc);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (const unsigned char c : std::filesystem::absolute(path).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      uri += hex;
    }
  }
  return uri + "?immutable=1";
}

DbHandle OpenHandle(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  // sqlite hands back a handle even on failure; it must still be closed.
  DbHandle db(raw, &sqlite3_close_v2);
  if (rc != SQLITE_OK) {
    // "unable to open database file" says nothing of why; the descriptor
    // limit is the cause a user can least guess (the file is fine).
    const int error = db ? sqlite3_system_errno(db.get()) : 0;
    if (error == EMFILE || error == ENFILE) {
      throw StoreError(path + ": open: too many open files (" + std::strerror(error) +
                           "); raise the limit (ulimit -n) or close what holds descriptors",
                       rc);
    }
    ThrowSqlite(db.get(), path, "open", rc);
  }
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  return db;
}

}  // namespace feedtune::results
