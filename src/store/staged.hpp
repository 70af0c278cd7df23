// Images staged on a node's local disk for one Slurm job (host). Light:
// the per-rank path reads it.
//
//   ROOT/staged/JOB/KEY.sqfs|.sif   a node's copy, for the ranks of job JOB
//   ROOT/staged/JOB/KEY.part        a copy on its way (sbcast writes it)
//   ROOT/staged/JOB/KEY.ready       "rt-staged 1\nSIZE\nEXT\n": KEY.part is whole
//   ROOT/staged/JOB/PKEY.ref        "rt-staged-ref 1\nKEY\nEXT\n": the copy of the file at the
//                                   path PKEY names (rt stage FILE), found by the path alone
//   ROOT/staged/JOB/KEY.failed-STEP why step STEP's copy will not come (the sender's message)
//   ROOT/staged/JOB/KEY.sent        on the sending node: the nodes it went to (SLURM_STEP_NODELIST)
//   ROOT/staged/JOB/KEY.lock        the sending node's ranks take turns
//
// KEY names what was staged: a file by its path, size, inode and time of
// change; a stored image by its name. A copy is used only once its
// KEY.ready says it is whole: then KEY.part is renamed into place.
#pragma once
#include <sys/stat.h>

#include <optional>
#include <string>

#include "store/layout.hpp"
#include "store/root.hpp"

namespace rt::store {

// The Slurm job and step this process belongs to, from Slurm's
// environment (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_STEP_NUM_NODES,
// SLURM_NODEID); job empty outside a job.
struct SlurmPlace {
  std::string job;   // digits, or empty
  std::string step;  // digits (or "batch"), or empty outside a step
  int nodes = 0;     // nodes of the step (0 outside one)
  int node = -1;     // this node's index in the step
  std::string host;  // this node's name, for messages
  std::string nodelist;  // SLURM_STEP_NODELIST
};
SlurmPlace slurm_place();

// KEY for an image file (`path` absolute, `st` its stat) or a stored name.
std::string staged_key_for_file(const std::string& path, const struct stat& st);
std::string staged_key_for_name(const std::string& name);
// PKEY for the path (absolute) an image file was staged by, and its note.
std::string staged_key_for_path(const std::string& path);
std::string staged_ref_note(const std::string& key, const std::string& ext);

// "staged/JOB".
std::string staged_dir(const std::string& job);

// The staged copy KEY.EXT of `job` (ext "sqfs" or "sif") when it is whole:
// a copy sbcast delivered whole is put in place first. nullopt otherwise.
std::optional<std::string> find_staged(const Root& root, const std::string& job, const std::string& key,
                                       const std::string& ext);

// The copy of `job` staged for the file at `path` (rt stage FILE), by the
// path alone: nothing is asked of the file system the file lies on (the
// copy was made from the file as it was when the job staged it); its
// extension in `ext`. nullopt when none was.
std::optional<std::string> find_staged_by_path(const Root& root, const std::string& job, const std::string& path,
                                               std::string* ext);

// Waits, up to `timeout_s`, for the copy KEY.EXT another node sends
// (making ROOT/staged/JOB, which sbcast needs, first). Returns its path;
// throws rt::Error naming this node and `image` when a KEY.failed note
// comes instead, or nothing in time.
std::string wait_staged(const Root& root, const SlurmPlace& where, const std::string& key, const std::string& ext,
                        const std::string& image, int timeout_s);

// True when this node already sent KEY to the nodes of `where`'s step.
bool staged_sent(const Root& root, const SlurmPlace& where, const std::string& key);

// What KEY.ready says for a copy of `size` bytes.
std::string staged_ready_note(uint64_t size, const std::string& ext);

}  // namespace rt::store
