#include "record_batch.h"

#include <array>
#include <cstring>

#include <fmt/format.h>

namespace neuronsim::traces {
namespace {

// An args entry in the byte buffer: this header, then the key's bytes, then the text's.
struct EncodedEntry {
  sim::TraceArgs::Kind kind;
  uint32_t key_len, text_len;
  decltype(sim::TraceArgs::Entry::v) v;
  sim::TraceTextFormatter format;
};

void append_int(std::string& buf, uint64_t v) {
  const fmt::format_int text(v);
  buf.append(text.data(), text.size());
}

// Chrome trace timestamps are microseconds; print picoseconds exactly (6 decimals).
void append_us(std::string& buf, sim::SimTime t) {
  append_int(buf, t.ps / 1000000);
  char frac[7] = {'.', '0', '0', '0', '0', '0', '0'};
  uint64_t f = t.ps % 1000000;
  for (int i = 6; i > 0 && f > 0; --i, f /= 10) frac[i] = static_cast<char>('0' + f % 10);
  buf.append(frac, sizeof frac);
}

}  // namespace

uint32_t RecordBatch::append(std::string_view s) {
  const auto at = static_cast<uint32_t>(bytes_.size());
  bytes_.append(s);
  return at;
}

void RecordBatch::add_slice(const ChromeTrack* track, std::string_view name,
                            std::string_view category, sim::SimTime begin, sim::SimTime end,
                            const sim::TraceArgs& args) {
  Record r;
  r.kind = Kind::kSlice;
  r.track = track;
  r.begin = begin;
  r.end = end;
  r.name_len = static_cast<uint32_t>(name.size());
  r.name_at = append(name);
  r.category_len = static_cast<uint32_t>(category.size());
  r.category_at = append(category);
  if (!args.json().is_null()) {
    r.json = static_cast<int32_t>(json_.size());
    json_.push_back(args.json());
  }
  r.args_at = static_cast<uint32_t>(bytes_.size());
  r.args = static_cast<uint8_t>(args.size());
  for (const sim::TraceArgs::Entry& e : args) {
    const EncodedEntry h{e.kind, static_cast<uint32_t>(e.key.size()),
                         static_cast<uint32_t>(e.text.size()), e.v, e.format};
    bytes_.append(reinterpret_cast<const char*>(&h), sizeof h);
    bytes_.append(e.key);
    bytes_.append(e.text);
  }
  records_.push_back(r);
}

void RecordBatch::add_counter(const ChromeTrack* track, sim::SimTime t, double value) {
  Record r;
  r.kind = Kind::kCounter;
  r.track = track;
  r.begin = t;
  r.value = value;
  records_.push_back(r);
}

void RecordBatch::add_event(std::string_view json_text) {
  Record r;
  r.kind = Kind::kEvent;
  r.name_len = static_cast<uint32_t>(json_text.size());
  r.name_at = append(json_text);
  records_.push_back(r);
}

void RecordBatch::clear() {
  records_.clear();
  bytes_.clear();
  json_.clear();
}

void RecordBatch::write_json(std::string& buf, bool& first) const {
  std::array<sim::TraceArgs::Entry, sim::TraceArgs::kInlineEntries> entries;
  static const nlohmann::json kNoMembers;
  for (const Record& r : records_) {
    buf += first ? "" : ",\n";
    first = false;
    switch (r.kind) {
      case Kind::kEvent:
        buf.append(text(r.name_at, r.name_len));
        break;
      case Kind::kCounter:
        buf += "{\"ph\":\"C\",\"pid\":";
        append_int(buf, static_cast<uint64_t>(r.track->pid));
        buf += ",\"ts\":";
        append_us(buf, r.begin);
        buf += ",\"name\":";
        sim::append_json_string(buf, r.track->name);
        buf += ",\"args\":{\"value\":";
        sim::append_json_number(buf, r.value);
        buf += "}}";
        break;
      case Kind::kSlice: {
        // Built by hand: the timestamps must stay exact decimal strings.
        buf += "{\"ph\":\"X\",\"pid\":";
        append_int(buf, static_cast<uint64_t>(r.track->pid));
        buf += ",\"tid\":";
        append_int(buf, static_cast<uint64_t>(r.track->tid));
        buf += ",\"ts\":";
        append_us(buf, r.begin);
        buf += ",\"dur\":";
        append_us(buf, r.end - r.begin);
        buf += ",\"name\":";
        sim::append_json_string(buf, text(r.name_at, r.name_len));
        buf += ",\"cat\":";
        sim::append_json_string(buf, text(r.category_at, r.category_len));
        buf += ",\"args\":";
        size_t at = r.args_at;
        for (size_t i = 0; i < r.args; ++i) {
          EncodedEntry h;
          std::memcpy(&h, bytes_.data() + at, sizeof h);
          at += sizeof h;
          sim::TraceArgs::Entry& e = entries[i];
          e.kind = h.kind;
          e.v = h.v;
          e.format = h.format;
          e.key = text(static_cast<uint32_t>(at), h.key_len);
          at += h.key_len;
          e.text = text(static_cast<uint32_t>(at), h.text_len);
          at += h.text_len;
        }
        sim::append_args_json(buf, r.json >= 0 ? json_[r.json] : kNoMembers, entries.data(),
                              r.args);
        buf += '}';
        break;
      }
    }
  }
}

}  // namespace neuronsim::traces
