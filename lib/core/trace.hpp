// A process-wide recorder of timed events for Chrome trace-event JSON
// (--trace; io/trace_writer.hpp writes it, one process per rank).
//
// Off by default: every recording call first checks one atomic flag, so
// untraced runs pay a branch. Events hold static names (string literals) and
// an optional index ("forward h.3" = name "forward h", index 3), so
// recording never formats or allocates a string; the event array grows
// geometrically up to a cap (then further events are counted, not kept).
//
// Lanes are the trace's threads: lane 0 is the training loop; each
// communicator's progress engine and the background checkpoint writer
// register their own. Slices on one lane must nest (Span does, by scope);
// collectives, whose issue-to-completion intervals overlap each other, are
// async events instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::trace {

struct Event {
  const char* name = "";
  const char* cat = "";
  int index = -1;         // appended to the name when >= 0
  int lane = 0;
  bool async = false;     // issue -> completion of a collective (may overlap others)
  uint64_t id = 0;        // async events: pairs begin and end
  double ts_us = 0, dur_us = 0;
  int64_t bytes = -1;     // collectives: bytes this rank sends
};

// Starts recording (clears earlier events); timestamps count from now.
// Callers start all ranks right after a barrier so their clocks line up.
void start(size_t max_events = size_t(1) << 21);
void stop();
bool enabled();
double now_us();
// Counts start() calls: a recorder that maps another clock (a GPU's events)
// onto now_us() takes its reference again when this changes.
uint64_t epoch();

// A named lane (thread row) of this process; the same name gives the same lane.
int lane(const std::string& name);
std::vector<std::string> lanes();

void record(const Event& e);
// Everything recorded so far, and how many events the cap dropped.
std::vector<Event> events();
size_t dropped();

// The device's own clock for the training loop's slices. On a GPU the
// loop's spans time the host's enqueueing; with marks set, each span on
// lane 0 also marks its begin and end on the compute stream, and the marks
// become a slice at the GPU's times on a lane of their own
// (strategies/cuda/stream_marks.hpp). begin() returns a token for end().
class DeviceMarks {
 public:
  virtual ~DeviceMarks() = default;
  virtual int begin(const char* name, const char* cat, int index) = 0;
  virtual void end(int token) = 0;
  // Waits for the device to pass every mark and records their slices (the
  // end of a trace, before stop()).
  virtual void finish() = 0;
};
// The process's marks (nullptr: none); the caller keeps them alive until unset.
void set_device_marks(DeviceMarks* marks);
DeviceMarks* device_marks();

// A slice covering this object's lifetime on `lane` (on lane 0, and with
// device marks set, also on the device's lane).
class Span {
 public:
  Span(const char* name, const char* cat, int index = -1, int lane = 0)
      : on_(enabled()), name_(name), cat_(cat), index_(index), lane_(lane), t0_(on_ ? now_us() : 0) {
    if (on_ && lane == 0 && (marks_ = device_marks())) token_ = marks_->begin(name, cat, index);
  }
  ~Span() {
    if (!on_) return;
    record({name_, cat_, index_, lane_, false, 0, t0_, now_us() - t0_, -1});
    if (marks_) marks_->end(token_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  bool on_;
  const char* name_;
  const char* cat_;
  int index_, lane_;
  double t0_;
  DeviceMarks* marks_ = nullptr;
  int token_ = -1;
};

}  // namespace gpt::trace
