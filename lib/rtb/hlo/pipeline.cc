#include "rtb/hlo/pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/hlo/splitter.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {

namespace {

// ---- pipelined mode: pieces scanned in parallel, one consumer ----------------------------------
//
// On a contiguous source (a mapped file) the statements stay valid as views, so the per-byte work
// can run on other threads while the caller's thread analyses what they found. The text is cut
// into pieces of about SplitOptions::piece_bytes, each starting where a computation's closing
// line ends (next_piece_start: a guess). Scanning threads take the next piece, scan it from the
// state such a boundary has (depth 0, outside strings, no pending statement), parse the
// instruction heads and run a filter of their own (StatementFilter::fork), which drops most
// statements: what crosses over is a small record per kept statement. The consumer takes the
// pieces in order. It checks each guess against the state the scan of the previous piece really
// ended in; where a guess was wrong (a line starting with '}' inside a multi-line string, say),
// it drops that piece's records and scans the piece again itself, from the true state and with
// the previous piece's filter, so the callback always sees what one thread would have given.
// The consumer also releases the mapping behind itself, which bounds the resident text by the
// pieces in flight. Record batches are reused (fresh ones would be newly zeroed pages).
// The tests check that all modes give the same statements.

// A statement in transit between the threads, compact (the consumer reads every byte of it
// from the other core's cache): views as offsets from `begin`.
struct Candidate {
  const char* begin;
  std::int64_t line;
  std::uint64_t hash;  // the filter's note
  std::uint32_t length;
  std::uint32_t count;  // the filter's note
  std::uint32_t name_offset, name_length;
  std::uint32_t shape_offset, shape_length;
  std::uint32_t opcode_offset, opcode_length;  // the call runs from the opcode's end to the end
  std::uint32_t key_offset, key_length;        // the filter's note
  std::uint8_t depth_after;                    // statements end at depth 0 or 1
  bool has_head;
  bool root;
  std::uint8_t kind;  // the filter's note
  std::uint16_t tag;  // the filter's note (fits in the padding)

  static std::uint32_t offset(const char* begin, std::string_view part) {
    return part.data() == nullptr ? 0 : static_cast<std::uint32_t>(part.data() - begin);
  }

  // Fills `c` (value-initialised, in place in its batch: building one on the stack and copying
  // it in made the copy's wide loads wait on the narrow stores just made).
  static void fill(Candidate& c, const Statement& s, const StatementNote* note) {
    c.begin = s.text.data();
    c.line = s.line;
    c.length = static_cast<std::uint32_t>(s.text.size());
    c.depth_after = static_cast<std::uint8_t>(s.depth_after);
    if (s.head != nullptr) {
      c.has_head = true;
      c.root = s.head->root;
      c.name_offset = offset(c.begin, s.head->name);
      c.name_length = static_cast<std::uint32_t>(s.head->name.size());
      c.shape_offset = offset(c.begin, s.head->shape);
      c.shape_length = static_cast<std::uint32_t>(s.head->shape.size());
      c.opcode_offset = offset(c.begin, s.head->opcode);
      c.opcode_length = static_cast<std::uint32_t>(s.head->opcode.size());
    }
    if (note != nullptr) {
      c.hash = note->hash;
      c.count = note->count;
      c.kind = note->kind;
      c.tag = note->tag;
      c.key_offset = offset(c.begin, note->key);
      c.key_length = static_cast<std::uint32_t>(note->key.size());
    }
  }

  std::string_view slice(std::uint32_t from, std::uint32_t length) const {
    return std::string_view(begin + from, length);
  }

  void head_into(InstructionHead& h) const {
    h.root = root;
    h.name = slice(name_offset, name_length);
    h.shape = slice(shape_offset, shape_length);
    h.opcode = slice(opcode_offset, opcode_length);
    std::uint32_t call = opcode_offset + opcode_length;
    h.call = slice(call, this->length - call);
  }

  void note_into(StatementNote& n) const {
    n.kind = kind;
    n.count = count;
    n.hash = hash;
    n.tag = tag;
    n.key = key_length > 0 ? slice(key_offset, key_length) : std::string_view();
  }
};

static_assert(sizeof(Candidate) <= 72, "Candidate is copied across cores: keep it small");

struct Stopped {};  // unwinds a scanning thread when the caller gives up

std::size_t automatic_piece_bytes(std::size_t text_bytes, int scanners) {
  constexpr std::size_t kMin = std::size_t{64} << 10;
  constexpr std::size_t kMax = std::size_t{2} << 20;
  return std::clamp<std::size_t>(text_bytes / (8 * static_cast<std::size_t>(scanners)), kMin, kMax);
}

class Pipeline {
 public:
  Pipeline(ByteSource& source, const SplitOptions& options, int scanners,
           const std::function<void(const Statement&)>& on_statement, StatementFilter* filter)
      : source_(source),
        options_(options),
        on_statement_(on_statement),
        filter_(filter),
        text_(source.contiguous()),
        scanners_(scanners),
        piece_bytes_(options.piece_bytes > 0 ? options.piece_bytes
                                             : automatic_piece_bytes(text_.size(), scanners)),
        max_pieces_ahead_(4 * static_cast<std::size_t>(scanners) + 4) {}

  SplitEnd run() {
    std::vector<std::thread> threads;
    auto stop_and_join = [&] {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      changed_.notify_all();
      for (std::thread& thread : threads) thread.join();
    };
    SplitEnd end;
    try {
      for (int i = 0; i < scanners_; ++i) threads.emplace_back([this] { scan_pieces(); });
      end = consume();
    } catch (...) {
      stop_and_join();
      if (error_) std::rethrow_exception(error_);
      throw;
    }
    stop_and_join();
    if (error_) std::rethrow_exception(error_);
    return end;
  }

 private:
  static constexpr std::size_t kBatch = 1024;           // records per hand-over
  static constexpr std::size_t kLookahead = 8;          // Statement::ahead: this many places on
  static constexpr std::size_t kPrefetchDistance = 16;  // text prefetched this many places on

  using Batch = std::vector<Candidate>;

  struct Piece {
    std::size_t end = 0;  // the next piece's guessed start
    bool final = false;   // ends at the end of the text
    std::deque<Batch> batches;
    bool finished = false;  // scanned: end_info, end_state, own_filter are set
    SplitEnd end_info;      // lines counted from the piece's start
    ScanState end_state;
    std::unique_ptr<StatementFilter> own_filter;  // pieces after the first (the first: filter_)
  };

  // Scans [range.start, range.end) with `filter`, handing each full batch to `deliver`.
  template <typename Deliver>
  std::pair<SplitEnd, ScanState> scan_range(const PieceRange& range, StatementFilter* filter,
                                            Deliver&& deliver) {
    Batch batch = take_spare();
    Splitter splitter(
        source_, options_,
        [&](const Statement& s) {
          if (filter != nullptr) {
            StatementNote note;
            if (!filter->keep(s, note)) return;
            Candidate::fill(batch.emplace_back(), s, &note);
          } else {
            Candidate::fill(batch.emplace_back(), s, nullptr);
          }
          if (batch.size() == kBatch) {
            deliver(batch);
            batch = take_spare();
          }
        },
        &range);
    SplitEnd end = splitter.run();
    if (!batch.empty()) {
      deliver(batch);
    } else {
      give_spare(std::move(batch));
    }
    return {std::move(end), splitter.state()};
  }

  Batch take_spare() {
    Batch batch;
    {
      std::lock_guard<std::mutex> lock(spare_mutex_);
      if (!spare_.empty()) {
        batch = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    batch.clear();
    batch.reserve(kBatch);
    return batch;
  }

  void give_spare(Batch batch) {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    spare_.push_back(std::move(batch));
  }

  // A scanning thread: takes pieces until there are none left or the consumer stops.
  void scan_pieces() {
    try {
      for (;;) {
        Piece* piece = nullptr;
        std::size_t begin = 0;
        std::size_t end = 0;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait(
              lock, [&] { return stop_ || all_claimed_ || pieces_.size() < max_pieces_ahead_; });
          if (stop_ || all_claimed_) return;
          // Each piece runs from where the previous one ends to the first guessed boundary at
          // least piece_bytes_ on (usually a few KiB further: one search under the lock).
          begin = next_begin_;
          end = text_.size() - begin <= piece_bytes_
                    ? text_.size()
                    : next_piece_start(text_, begin + piece_bytes_);
          next_begin_ = end;
          all_claimed_ = end == text_.size();
          pieces_.push_back(std::make_unique<Piece>());
          piece = pieces_.back().get();
          piece->end = end;
          piece->final = all_claimed_;
        }
        changed_.notify_all();
        std::unique_ptr<StatementFilter> own;
        StatementFilter* filter = filter_;
        if (filter_ != nullptr && begin > 0) {
          own = filter_->fork();
          filter = own.get();
        }
        PieceRange range{ScanState::piece_start(begin), end, piece->final};
        auto [end_info, end_state] = scan_range(range, filter, [&](Batch& batch) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stop_) throw Stopped{};
            piece->batches.push_back(std::move(batch));
          }
          changed_.notify_all();
        });
        {
          std::lock_guard<std::mutex> lock(mutex_);
          piece->end_info = std::move(end_info);
          piece->end_state = end_state;
          piece->own_filter = std::move(own);
          piece->finished = true;
        }
        changed_.notify_all();
      }
    } catch (const Stopped&) {
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      stop_ = true;
    }
    changed_.notify_all();
  }

  // Waits until `ready` holds (under the lock); throws Stopped if a scanning thread failed.
  template <typename Ready>
  void wait_for(std::unique_lock<std::mutex>& lock, Ready ready) {
    changed_.wait(lock, [&] { return ready() || error_ != nullptr; });
    if (error_ != nullptr) throw Stopped{};
  }

  SplitEnd consume() {
    std::int64_t line_base = 0;  // lines before the point `state` counts its lines from
    ScanState state;             // the true scan state at the start of the current piece
    StatementFilter* filter = filter_;
    std::unique_ptr<StatementFilter> owned_filter;
    StatementNote carry;  // pending notes of earlier filters, for the next kept statement
    bool carrying = false;
    for (std::size_t index = 0;; ++index) {
      Piece* piece = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wait_for(lock, [&] { return !pieces_.empty(); });
        piece = pieces_.front().get();
      }
      SplitEnd end_info;
      if (index == 0 || state.at_top_level_boundary()) {
        // The guess holds: take the piece's records, with its filter.
        if (index > 0) {
          line_base += state.line;
          if (filter_ != nullptr) fold(carry, carrying, filter->pending());
        }
        for (;;) {
          Batch batch;
          {
            std::unique_lock<std::mutex> lock(mutex_);
            wait_for(lock, [&] { return !piece->batches.empty() || piece->finished; });
            if (piece->batches.empty()) break;
            batch = std::move(piece->batches.front());
            piece->batches.pop_front();
          }
          changed_.notify_all();
          deliver(batch, line_base, carry, carrying);
        }
        // The piece is scanned: its filter is the one whose notes come next.
        end_info = std::move(piece->end_info);
        state = piece->end_state;
        if (piece->own_filter) {
          owned_filter = std::move(piece->own_filter);
          filter = owned_filter.get();
        }
      } else {
        // The guess was wrong: wait for the piece's scan to end, drop it and scan the piece
        // again from the true state, with the filter that scanned the text before it.
        {
          std::unique_lock<std::mutex> lock(mutex_);
          wait_for(lock, [&] { return piece->finished; });
          for (Batch& batch : piece->batches) give_spare(std::move(batch));
          piece->batches.clear();
        }
        PieceRange range{state, piece->end, piece->final};
        auto [rescan_end, rescan_state] = scan_range(
            range, filter, [&](Batch& batch) { deliver(batch, line_base, carry, carrying); });
        end_info = std::move(rescan_end);
        state = rescan_state;
      }
      bool final = piece->final;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        pieces_.pop_front();
      }
      changed_.notify_all();
      if (!end_info.clean || final) {
        end_info.line += end_info.clean ? 0 : line_base;
        end_info.lines += line_base;
        end_info.bytes = text_.size();
        if (filter_ != nullptr) {
          end_info.pending = filter->pending();
          if (carrying) filter_->merge_pending(carry, end_info.pending);
        }
        return end_info;
      }
    }
  }

  // Adds a filter's pending note (later) to the carried one (earlier).
  void fold(StatementNote& carry, bool& carrying, const StatementNote& pending) {
    if (carrying) {
      StatementNote merged = pending;
      filter_->merge_pending(carry, merged);
      carry = merged;
    } else {
      carry = pending;
      carrying = true;
    }
  }

  // Hands a batch of records to the callback, lines shifted by `line_base`; the first kept
  // statement after a switch of filters gets the carried pending note merged in.
  void deliver(Batch& batch, std::int64_t line_base, StatementNote& carry, bool& carrying) {
    const bool noted = filter_ != nullptr;
    if (noted) {
      notes_.resize(batch.size());
      for (std::size_t k = 0; k < batch.size(); ++k) batch[k].note_into(notes_[k]);
      if (carrying && !batch.empty()) {
        filter_->merge_pending(carry, notes_[0]);
        carrying = false;
      }
    }
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const Candidate& c = batch[k];
      if (k + kPrefetchDistance < batch.size()) {
        // The consumer reads little of a statement's text, but from another core's cache.
        const Candidate& later = batch[k + kPrefetchDistance];
        __builtin_prefetch(later.has_head ? later.begin + later.opcode_offset : later.begin);
      }
      // Field by field into objects that live across iterations: a temporary copied whole
      // made the copy's wide loads wait on the narrow stores that built it.
      if (c.has_head) c.head_into(head_);
      statement_.text = std::string_view(c.begin, c.length);
      statement_.line = c.line + line_base;
      statement_.depth_after = c.depth_after;
      statement_.head = c.has_head ? &head_ : nullptr;
      statement_.note = noted ? &notes_[k] : nullptr;
      statement_.ahead = noted && k + kLookahead < batch.size() ? &notes_[k + kLookahead] : nullptr;
      on_statement_(statement_);
    }
    if (!batch.empty()) {
      const char* kept = batch.back().begin + batch.back().length;
      source_.release(static_cast<std::size_t>(kept - text_.data()));
    }
    give_spare(std::move(batch));
  }

  ByteSource& source_;
  const SplitOptions& options_;
  const std::function<void(const Statement&)>& on_statement_;
  StatementFilter* const filter_;  // the caller's (first piece; prototype of the others)
  const std::string_view text_;
  const int scanners_;
  const std::size_t piece_bytes_;
  const std::size_t max_pieces_ahead_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Piece>> pieces_;  // claimed and not yet consumed, in order
  std::size_t next_begin_ = 0;                 // where the next piece to claim starts
  bool all_claimed_ = false;                   // the final piece has been claimed
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex spare_mutex_;
  std::vector<Batch> spare_;          // consumed batches, for reuse
  std::vector<StatementNote> notes_;  // the notes of the batch being delivered
  InstructionHead head_;              // the head of the statement being delivered
  Statement statement_;               // the statement being delivered
};

}  // namespace

SplitEnd split_pipelined(ByteSource& source, const SplitOptions& options, int scanners,
                         const std::function<void(const Statement&)>& on_statement,
                         StatementFilter* filter) {
  return Pipeline(source, options, scanners, on_statement, filter).run();
}

std::size_t next_piece_start(std::string_view text, std::size_t from) {
  std::size_t at = from;
  while (at < text.size()) {
    // A line starting with '}': at `at` itself if a line starts there, else after a newline.
    std::size_t brace = at;
    if (at == 0 || text[at - 1] != '\n' || text[at] != '}') {
      brace = text.find("\n}", at == 0 ? 0 : at - 1);
      if (brace == std::string_view::npos) break;
      ++brace;
    }
    std::size_t newline = text.find('\n', brace);
    if (newline == std::string_view::npos || newline + 1 >= text.size()) break;
    std::size_t next = newline + 1;
    char c = text[next];
    if (c == '\n' || (!is_space(c) && c != '}' && c != '"')) return next;
    at = next;
  }
  return text.size();
}

}  // namespace rtb::hlo
