// The SQLite plumbing of the results files, shared by the store
// (results/store.cc), the schema (results/schema.cc) and the merge
// (results/merge.cc): opening a connection, errors that name the file and the
// operation, waiting out another writer (busy handling), one prepared
// statement, one write transaction. Internal to feedtune_results: nothing
// outside results/ includes it.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "results/store.h"

namespace feedtune::results {

inline constexpr int kBusyTimeoutMs = 10000;

// Builds "<path>: <operation>: <sqlite message>", adding what to do for the
// failures a user can act on.
std::string ErrorText(const std::string& path, std::string_view operation, int rc, std::string_view message);

[[noreturn]] void ThrowSqlite(sqlite3* db, const std::string& path, std::string_view operation, int rc);

// Runs SQL that takes no values (schema, pragmas, transaction control).
void Exec(sqlite3* db, const std::string& path, std::string_view operation, const char* sql);

using DbHandle = std::unique_ptr<sqlite3, decltype(&sqlite3_close_v2)>;

// Opens a connection with `flags` (plus NOMUTEX: one connection, one thread),
// extended result codes on and a busy timeout of kBusyTimeoutMs, so a second
// writer waits for the first instead of failing. Throws StoreError.
DbHandle OpenHandle(const std::string& path, int flags);

// "file:/a%20b.db?immutable=1": a path as an sqlite URI, with the characters
// that URIs reserve percent-encoded.
std::string ImmutableUri(const std::string& path);

// WAL lets `feedtune report` read while a sweep writes. Filesystems without
// shared memory keep the rollback journal, which is still safe, so the mode
// actually granted is not checked.
void EnableWal(sqlite3* db, const std::string& path);

// Owns one prepared statement. Binds and reads columns by position; every
// failure becomes a StoreError naming the file and the operation.
class Statement;

// The statements a connection writes over and over, prepared once and kept
// by their SQL until the connection closes: a merge of thousands of files
// writes the same few INSERTs for every trial, and preparing one costs more
// than running it. Destroy it before its connection (declare it after).
class StatementCache {
 public:
  StatementCache() = default;
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache() {
    for (auto& [sql, entry] : entries_) sqlite3_finalize(entry.stmt);
  }

 private:
  friend class Statement;
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;  // a second Statement of the same SQL meanwhile prepares its own
  };
  std::map<std::string, Entry, std::less<>> entries_;
};

template <typename T>
inline constexpr bool kIsOptional = false;
template <typename T>
inline constexpr bool kIsOptional<std::optional<T>> = true;

class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, std::string_view operation, const char* sql)
      : db_(db), path_(path), operation_(operation) {
    const int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) ThrowSqlite(db_, path_, operation_, rc);
  }
  // The same, taking the statement from `cache` (preparing it there once).
  Statement(StatementCache& cache, sqlite3* db, const std::string& path, std::string_view operation,
            const std::string& sql)
      : db_(db), path_(path), operation_(operation) {
    auto it = cache.entries_.find(sql);
    if (it == cache.entries_.end()) {
      sqlite3_stmt* stmt = nullptr;
      const int rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) ThrowSqlite(db_, path_, operation_, rc);
      it = cache.entries_.emplace(sql, StatementCache::Entry{stmt, false}).first;
    }
    if (it->second.in_use) {
      const int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt_, nullptr);
      if (rc != SQLITE_OK) ThrowSqlite(db_, path_, operation_, rc);
      return;
    }
    it->second.in_use = true;
    stmt_ = it->second.stmt;
    cached_ = &it->second.in_use;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() {
    if (cached_ == nullptr) {
      sqlite3_finalize(stmt_);
      return;
    }
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *cached_ = false;
  }

  // Binds values to parameters 1, 2, ... in order.
  template <typename... Values>
  Statement& BindAll(const Values&... values) {
    int index = 1;
    (Bind(index++, values), ...);
    return *this;
  }

  // Binds one value to parameter `index` (1-based): for column lists a table drives.
  template <typename Value>
  Statement& BindAt(int index, const Value& value) {
    Bind(index, value);
    return *this;
  }

  // True when a row is ready, false when the statement is done.
  bool Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    ThrowSqlite(db_, path_, operation_, rc);
  }

  // Runs a statement that returns no rows.
  void Run() {
    while (Step()) {
    }
  }

  // Makes the statement ready to run again with new values.
  void Reset() {
    // reset returns the last step's error, which Step() already reported.
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  int Int32(int column) const { return sqlite3_column_int(stmt_, column); }
  bool Bool(int column) const { return sqlite3_column_int(stmt_, column) != 0; }
  // NULL reads back as NaN: that is what was stored (sqlite binds NaN as NULL).
  double Double(int column) const {
    return IsNull(column) ? std::numeric_limits<double>::quiet_NaN()
                          : sqlite3_column_double(stmt_, column);
  }
  std::string Text(int column) const {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    if (text == nullptr) return {};
    return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
  }
  template <typename T>
  std::optional<T> Optional(int column) const {
    if (IsNull(column)) return std::nullopt;
    if constexpr (std::is_same_v<T, double>) {
      return Double(column);
    } else if constexpr (std::is_same_v<T, std::string>) {
      return Text(column);
    } else {
      return static_cast<T>(Int(column));
    }
  }
  // The column as a field of type T takes it: int (Int32), int64_t (Int),
  // bool, double, std::string, or an optional of one (NULL: none); what a
  // column table (results/schema.h) reads a field with.
  template <typename T>
  T Get(int column) const {
    if constexpr (kIsOptional<T>) {
      return Optional<typename T::value_type>(column);
    } else if constexpr (std::is_same_v<T, bool>) {
      return Bool(column);
    } else if constexpr (std::is_same_v<T, int>) {
      return Int32(column);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      return Int(column);
    } else if constexpr (std::is_same_v<T, double>) {
      return Double(column);
    } else {
      static_assert(std::is_same_v<T, std::string>, "a field type Get does not read");
      return Text(column);
    }
  }

 private:
  void Bind(int index, std::nullopt_t) { Check(sqlite3_bind_null(stmt_, index)); }
  void Bind(int index, bool value) { Check(sqlite3_bind_int(stmt_, index, value ? 1 : 0)); }
  void Bind(int index, int value) { Check(sqlite3_bind_int(stmt_, index, value)); }
  void Bind(int index, int64_t value) { Check(sqlite3_bind_int64(stmt_, index, value)); }
  void Bind(int index, double value) { Check(sqlite3_bind_double(stmt_, index, value)); }
  void Bind(int index, const std::string& value) {
    // SQLITE_TRANSIENT: sqlite copies, so the statement never points into a caller's string.
    Check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }
  template <typename T>
  void Bind(int index, const std::optional<T>& value) {
    if (value.has_value()) {
      Bind(index, *value);
    } else {
      Bind(index, std::nullopt);
    }
  }

  void Check(int rc) const {
    if (rc != SQLITE_OK) ThrowSqlite(db_, path_, operation_, rc);
  }

  sqlite3* db_;
  const std::string& path_;
  std::string operation_;
  sqlite3_stmt* stmt_ = nullptr;
  bool* cached_ = nullptr;  // the cache entry's in_use flag, when taken from a StatementCache
};

// BEGIN IMMEDIATE takes the write lock up front, so a second writer waits at
// the start (under busy_timeout) instead of failing at COMMIT with a
// transaction it cannot upgrade. Rolls back unless Commit() ran.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path, std::string_view operation)
      : db_(db), path_(path), operation_(operation) {
    Exec(db_, path_, operation_ + " (begin)", "BEGIN IMMEDIATE");
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    // A failed COMMIT leaves the transaction open too; ROLLBACK closes it. Errors
    // are ignored: a destructor must not throw, and sqlite already rolled back
    // when the failure was fatal.
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  void Commit() {
    Exec(db_, path_, operation_ + " (commit)", "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  std::string operation_;
  bool committed_ = false;
};

inline std::optional<std::string> NullIfEmpty(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return text;
}

}  // namespace feedtune::results
