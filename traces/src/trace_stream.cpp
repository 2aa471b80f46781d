#include "neuronsim/traces/trace_stream.h"

#include <cstdio>
#include <iterator>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "neuronsim/traces/trace_reader.h"

namespace neuronsim::traces {
namespace {

// The file in 1 MiB reads, as the input iterator the JSON parser pulls characters through (its
// FILE* adapter takes a locked fgetc per character).
class ChunkedFile {
 public:
  explicit ChunkedFile(std::FILE* f) : f_(f), buf_(1 << 20) { fill(); }
  bool at_end() const { return pos_ == len_; }
  char get() const { return buf_[pos_]; }
  void next() {
    if (++pos_ == len_) fill();
  }
  size_t bytes_read() const { return total_; }

 private:
  void fill() {
    pos_ = 0;
    len_ = std::fread(buf_.data(), 1, buf_.size(), f_);
    total_ += len_;
  }
  std::FILE* f_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0, total_ = 0;
};

class ChunkedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  ChunkedIterator() = default;  // the end
  explicit ChunkedIterator(ChunkedFile* f) : f_(f) {}
  char operator*() const { return f_->get(); }
  ChunkedIterator& operator++() {
    f_->next();
    return *this;
  }
  ChunkedIterator operator++(int) {
    ChunkedIterator old = *this;
    f_->next();
    return old;
  }
  bool operator==(const ChunkedIterator& o) const { return ended() == o.ended(); }
  bool operator!=(const ChunkedIterator& o) const { return !(*this == o); }

 private:
  bool ended() const { return f_ == nullptr || f_->at_end(); }
  ChunkedFile* f_ = nullptr;
};

// SAX events to whole events: the document's top level is followed (an object and its members,
// or a bare array); each element of the event array, and each other member, is built as a JSON
// value (as nlohmann's DOM parser builds it) and handed over when complete.
class EventSax {
 public:
  EventSax(TraceEventHandler& h, StreamedDocument& doc, std::string origin, size_t file_size)
      : handler_(h), doc_(doc), origin_(std::move(origin)), file_size_(file_size) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(nlohmann::json::number_integer_t v) { return value(v); }
  bool number_unsigned(nlohmann::json::number_unsigned_t v) { return value(v); }
  bool number_float(nlohmann::json::number_float_t v, const std::string&) { return value(v); }
  bool string(std::string& v) { return value(std::move(v)); }
  bool binary(nlohmann::json::binary_t& v) { return value(std::move(v)); }

  bool start_object(size_t) {
    if (stack_.empty() && depth_ == 0) {  // the document
      doc_.is_object = true;
      depth_ = 1;
      return true;
    }
    stack_.push_back(place(nlohmann::json::value_t::object));
    return true;
  }
  bool key(std::string& k) {
    if (building()) {
      object_element_ = &(*stack_.back())[k];
    } else {
      member_ = k;
    }
    return true;
  }
  bool end_object() {
    if (building()) {
      stack_.pop_back();
      if (stack_.empty()) complete();
    }
    return true;
  }
  bool start_array(size_t) {
    if (stack_.empty() && depth_ == 0) {  // a bare event array
      doc_.has_event_array = true;
      in_events_ = true;
      depth_ = 1;
      return true;
    }
    if (!building() && depth_ == 1 && doc_.is_object && !in_events_ && member_ == "traceEvents") {
      doc_.has_event_array = true;
      in_events_ = true;
      depth_ = 2;
      return true;
    }
    stack_.push_back(place(nlohmann::json::value_t::array));
    return true;
  }
  bool end_array() {
    if (building()) {
      stack_.pop_back();
      if (stack_.empty()) complete();
    } else if (in_events_) {
      in_events_ = false;
      --depth_;
    }
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception&) {
    const bool early = position >= file_size_;
    throw TraceSyntaxError(
        fmt::format("{}: not a valid JSON trace ({}){}", origin_,
                    early ? "the file ends early" : "syntax error",
                    early ? " - was it truncated?" : fmt::format(" at byte {}", position)));
  }

 private:
  bool building() const { return !stack_.empty(); }
  template <typename V>
  bool value(V&& v) {
    if (building()) {
      place(std::forward<V>(v));
      return true;
    }
    if (depth_ == 0) return true;  // a scalar document: neither object nor array
    root_ = nlohmann::json(std::forward<V>(v));
    complete();
    return true;
  }
  // Where the next value goes: the root, the array being built, or the object's key.
  template <typename V>
  nlohmann::json* place(V&& v) {
    if (stack_.empty()) {
      root_ = nlohmann::json(std::forward<V>(v));
      return &root_;
    }
    if (stack_.back()->is_array()) {
      stack_.back()->emplace_back(std::forward<V>(v));
      return &stack_.back()->back();
    }
    *object_element_ = nlohmann::json(std::forward<V>(v));
    return object_element_;
  }
  void complete() {
    if (in_events_) {
      handler_.event(root_, ++index_);
    } else {
      doc_.members[member_] = std::move(root_);
    }
    root_ = nullptr;
  }

  TraceEventHandler& handler_;
  StreamedDocument& doc_;
  std::string origin_;
  size_t file_size_;
  int depth_ = 0;           // 1: inside the document, 2: inside its event array
  bool in_events_ = false;  // the next complete value is an event
  std::string member_;      // the document member being read
  nlohmann::json root_;     // the value being built
  std::vector<nlohmann::json*> stack_;
  nlohmann::json* object_element_ = nullptr;
  size_t index_ = 0;
};

}  // namespace

StreamedDocument stream_trace_file(const std::string& path, TraceEventHandler& handler) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw TraceFormatError(fmt::format("{}: cannot open trace file", path));
  std::fseek(f.get(), 0, SEEK_END);
  const long size = std::ftell(f.get());
  std::fseek(f.get(), 0, SEEK_SET);
  StreamedDocument doc;
  EventSax sax(handler, doc, path, size < 0 ? 0 : static_cast<size_t>(size));
  ChunkedFile file(f.get());
  nlohmann::json::sax_parse(ChunkedIterator(&file), ChunkedIterator(), &sax);
  return doc;
}

}  // namespace neuronsim::traces
