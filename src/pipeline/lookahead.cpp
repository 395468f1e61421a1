#include "pipeline/lookahead.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "strider/core/error.hpp"

namespace strider::pipeline_detail {

namespace {

void add(ReadStats& total, const ReadStats& after, const ReadStats& before) {
  total.bytes_read += after.bytes_read - before.bytes_read;
  total.useful_bytes += after.useful_bytes - before.useful_bytes;
  total.batches += after.batches - before.batches;
  total.read_calls += after.read_calls - before.read_calls;
  total.read_seconds += after.read_seconds - before.read_seconds;
  total.bytes_local += after.bytes_local - before.bytes_local;
  total.bytes_remote += after.bytes_remote - before.bytes_remote;
  total.remote_requests += after.remote_requests - before.remote_requests;
}

/// Runs `task`; its error, or null.
std::exception_ptr run_catching(const std::function<void()>& task) noexcept {
  try {
    task();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

std::int64_t count_chunk_decompressions(const std::vector<std::vector<std::int64_t>>& windows,
                                        std::int64_t cache_chunks) {
  // The uses in order, each window's chunks distinct; then each use's next use of the same chunk.
  std::vector<std::int64_t> uses;
  for (const std::vector<std::int64_t>& window : windows) {
    std::vector<std::int64_t> chunks = window;
    std::sort(chunks.begin(), chunks.end());
    chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
    uses.insert(uses.end(), chunks.begin(), chunks.end());
  }
  const auto count = static_cast<std::int64_t>(uses.size());
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> next_use(uses.size(), kNever);
  std::unordered_map<std::int64_t, std::int64_t> seen;  // chunk -> its first use after this point
  for (std::int64_t k = count - 1; k >= 0; --k) {
    const auto found = seen.find(uses[k]);
    if (found != seen.end()) next_use[k] = found->second;
    seen[uses[k]] = k;
  }
  // The cache: (next use, chunk), the farthest last; and each cached chunk's next use.
  std::set<std::pair<std::int64_t, std::int64_t>> cached;
  std::unordered_map<std::int64_t, std::int64_t> cached_next;
  std::int64_t decompressions = 0;
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t chunk = uses[k];
    const auto hit = cached_next.find(chunk);
    if (hit != cached_next.end()) {
      cached.erase({hit->second, chunk});
      cached_next.erase(hit);
    } else {
      ++decompressions;
    }
    // Keep it if it is needed again and the cache has room, or it is needed sooner than the farthest.
    if (cache_chunks <= 0 || next_use[k] == kNever) continue;
    if (static_cast<std::int64_t>(cached.size()) >= cache_chunks) {
      const auto farthest = std::prev(cached.end());
      if (farthest->first <= next_use[k]) continue;
      cached_next.erase(farthest->second);
      cached.erase(farthest);
    }
    cached.insert({next_use[k], chunk});
    cached_next[chunk] = next_use[k];
  }
  return decompressions;
}

LookaheadReader::LookaheadReader(BatchReader& reader, std::int64_t window_steps)
    : reader_(reader), window_steps_(std::max<std::int64_t>(1, window_steps)), stats_(reader.stats()) {}

LookaheadReader::~LookaheadReader() {
  stop();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LookaheadReader::submit(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(mutex_);
  task_ = std::move(task);
  pending_ = running_ = true;
  error_ = nullptr;
  if (no_thread_) return;
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { run_tasks(); });
    } catch (const std::system_error&) {  // no thread to spare: every read on the caller's thread
      no_thread_ = true;
      return;
    }
  }
  lock.unlock();
  changed_.notify_all();
}

bool LookaheadReader::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!pending_) return false;
  if (no_thread_ && running_) {
    std::function<void()> task = std::move(task_);
    lock.unlock();
    const std::exception_ptr error = run_catching(task);
    lock.lock();
    running_ = false;
    error_ = error;
  }
  changed_.wait(lock, [this] { return !running_; });
  pending_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return true;
}

void LookaheadReader::run_tasks() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return quit_ || (running_ && task_); });
    if (quit_) return;
    std::function<void()> task = std::move(task_);
    task_ = nullptr;
    lock.unlock();
    const std::exception_ptr error = run_catching(task);
    lock.lock();
    running_ = false;
    error_ = error;
    changed_.notify_all();
  }
}

void LookaheadReader::start(const Sampler& sampler, std::int64_t first_step, std::int64_t end_step) {
  stop();
  sampler_ = &sampler;
  end_step_ = end_step;
  static_cast<void>(first_step);  // the first read() makes its window
}

void LookaheadReader::stop() noexcept {
  try {
    if (wait() && next_) add(stats_, next_->read, ReadStats{});
  } catch (...) {  // the epoch ended; its error no longer matters
  }
  current_.reset();
  next_.reset();
  sampler_ = nullptr;
}

void LookaheadReader::read_window(Window& window, std::int64_t first, std::int64_t end) const {
  window.first_step = first;
  window.end_step = end;
  window.rows.clear();
  std::vector<std::int64_t> indices;
  for (std::int64_t step = first; step < end; ++step) {
    sampler_->batch(step, indices);
    window.rows.insert(window.rows.end(), indices.begin(), indices.end());
  }
  std::sort(window.rows.begin(), window.rows.end());
  window.rows.erase(std::unique(window.rows.begin(), window.rows.end()), window.rows.end());
  const auto count = static_cast<std::int64_t>(window.rows.size());
  const DatasetInfo& info = reader_.info();
  const std::int64_t bytes = reader_.samples_bytes(window.rows.data(), count);
  window.samples.resize(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)));
  window.labels.resize(info.has_labels ? static_cast<std::size_t>(count) : 0);
  window.offsets.resize(static_cast<std::size_t>(count) + 1);
  BatchDestination destination;
  destination.samples = window.samples.data();
  destination.samples_capacity_bytes = bytes;
  destination.labels = info.has_labels ? window.labels.data() : nullptr;
  destination.offsets = info.variable_length ? window.offsets.data() : nullptr;
  const ReadStats before = reader_.stats();
  reader_.read(window.rows.data(), count, destination);
  window.read = ReadStats{};
  add(window.read, reader_.stats(), before);
  // Byte offsets of the rows in the window: fixed size, or the tokens' offsets the read returned.
  const std::int64_t unit =
      info.variable_length ? static_cast<std::int64_t>(element_bytes(info.element_type)) : info.sample_bytes;
  for (std::int64_t k = 0; k <= count; ++k) window.offsets[k] = (info.variable_length ? window.offsets[k] : k) * unit;
}

void LookaheadReader::read_next_in_background() {
  if (!current_ || current_->end_step >= end_step_) return;
  if (!next_) next_ = std::make_unique<Window>();
  const std::int64_t first = current_->end_step;
  const std::int64_t end = std::min(end_step_, first + window_steps_);
  Window* window = next_.get();
  submit([this, window, first, end] { read_window(*window, first, end); });
}

void LookaheadReader::advance_to(std::int64_t step) {
  if (current_ && step >= current_->first_step && step < current_->end_step) return;
  if (wait()) add(stats_, next_->read, ReadStats{});  // rethrows the reader's error
  if (next_ && next_->first_step == step && next_->end_step > step) {
    std::swap(current_, next_);
  } else {
    if (!current_) current_ = std::make_unique<Window>();
    Window* window = current_.get();
    const std::int64_t end = std::min(end_step_, step + window_steps_);
    submit([this, window, step, end] { read_window(*window, step, end); });  // the reading thread reads
    wait();
    add(stats_, current_->read, ReadStats{});
  }
  if (next_) next_->first_step = next_->end_step = 0;  // consumed
  read_next_in_background();
}

void LookaheadReader::read(std::int64_t step, const std::vector<std::int64_t>& indices,
                           const BatchDestination& destination) {
  if (sampler_ == nullptr) STRIDER_THROW(UsageError, "lookahead: read() outside an epoch");
  advance_to(step);
  const Window& window = *current_;
  const DatasetInfo& info = reader_.info();
  std::int64_t at = 0;
  const auto count = static_cast<std::int64_t>(indices.size());
  const std::int64_t bytes = reader_.samples_bytes(indices.data(), count);
  if (bytes > destination.samples_capacity_bytes)
    STRIDER_THROW(UsageError, "read: the batch of " + std::to_string(count) + " samples needs " +
                                  std::to_string(bytes) + " bytes, the destination holds " +
                                  std::to_string(destination.samples_capacity_bytes));
  const std::int64_t token_bytes = static_cast<std::int64_t>(element_bytes(info.element_type));
  if (destination.offsets != nullptr && info.variable_length) destination.offsets[0] = 0;
  for (std::int64_t k = 0; k < count; ++k) {
    const auto found = std::lower_bound(window.rows.begin(), window.rows.end(), indices[k]);
    if (found == window.rows.end() || *found != indices[k])
      STRIDER_THROW(Error, "lookahead: row " + std::to_string(indices[k]) + " of step " + std::to_string(step) +
                               " is not in its window (the plan changed during the epoch?)");
    const auto slot = static_cast<std::size_t>(found - window.rows.begin());
    const std::int64_t size = window.offsets[slot + 1] - window.offsets[slot];
    if (size > 0)
      std::memcpy(destination.samples + at, window.samples.data() + window.offsets[slot],
                  static_cast<std::size_t>(size));
    at += size;
    if (destination.labels != nullptr && info.has_labels) destination.labels[k] = window.labels[slot];
    if (destination.offsets != nullptr && info.variable_length) destination.offsets[k + 1] = at / token_bytes;
  }
}

}  // namespace strider::pipeline_detail
