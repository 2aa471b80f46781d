#pragma once
// Every error a user can cause names what is wrong; none of them crashes or hangs the simulator.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace neuronsim::device_model {

/// Base of all neuronsim device-model errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A malformed preset, an unknown override key, a value of the wrong type.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A program that could not be parsed (bad JSON, unknown opcode, missing field).
class ProgramFormatError : public Error {
 public:
  using Error::Error;
};

/// An instruction that breaks a hardware rule, found before anything runs.
class ValidationError : public Error {
 public:
  ValidationError(int64_t instruction_index, std::string stream, std::string opcode,
                  std::string rule, const std::string& detail);
  int64_t instruction_index() const { return index_; }
  const std::string& stream() const { return stream_; }
  const std::string& opcode() const { return opcode_; }
  /// Stable rule identifier, e.g. "partition-start-alignment".
  const std::string& rule() const { return rule_; }

 private:
  int64_t index_;
  std::string stream_, opcode_, rule_;
};

/// Engines blocked on semaphores that nothing will signal.
class DeadlockError : public Error {
 public:
  using Error::Error;
};

/// A device-memory allocation that does not fit in HBM.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(uint64_t requested, uint64_t free, uint64_t capacity, const std::string& where);
  /// With a complete message (`full_message` is true).
  OutOfMemoryError(uint64_t requested, uint64_t free, uint64_t capacity, const std::string& message,
                   bool full_message);
  uint64_t requested() const { return requested_; }
  uint64_t free_bytes() const { return free_; }
  uint64_t capacity() const { return capacity_; }

 private:
  uint64_t requested_, free_, capacity_;
};

}  // namespace neuronsim::device_model
