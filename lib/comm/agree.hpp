// Two small collectives that let every rank decide alike from what each saw
// on its own: which ranks a condition holds on (the lowest of them names
// the problem in a one-line error), and one rank's string on every rank.
// Header-only (plain MPI), so that the I/O library uses them without
// linking the communicators.
#pragma once

#include <mpi.h>

#include <string>

namespace gpt {

// Collective over comm: on how many ranks `holds` is true, and the lowest
// of them (-1 when none).
struct RanksWhere {
  int count = 0;
  int first = -1;
};
inline RanksWhere ranks_where(bool holds, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int count = holds ? 1 : 0, first = holds ? rank : size;
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  return {count, count > 0 ? first : -1};
}

// Collective over comm: root's `s` on every rank.
inline std::string broadcast_string(std::string s, int root, MPI_Comm comm) {
  int n = int(s.size());
  MPI_Bcast(&n, 1, MPI_INT, root, comm);
  s.resize(size_t(n));
  MPI_Bcast(s.data(), n, MPI_CHAR, root, comm);
  return s;
}

// This rank's host, as MPI names it (for the errors that name a rank).
inline std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, size_t(len));
}

// Collective over comm: the note of the lowest rank whose note is not
// empty, on every rank ("" where every note is empty), and where notes
// are (a rank's reason that something cannot run, named once for the job).
struct FirstNote {
  std::string text;
  RanksWhere where;
};
inline FirstNote first_note(std::string note, MPI_Comm comm) {
  const RanksWhere where = ranks_where(!note.empty(), comm);
  if (where.count == 0) return {"", where};
  return {broadcast_string(std::move(note), where.first, comm), where};
}

}  // namespace gpt
