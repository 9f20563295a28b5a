// Host lists for lockstep-run: Open MPI's hostfile format ("host slots=N",
// '#' comments, blank lines) and -H lists ("a:2,b:2" or "a,b"). Errors are
// InputErrors naming the file and line (or the -H entry).
#pragma once

#include <string>
#include <vector>

namespace lockstep {

struct Host {
  std::string name;
  int slots = 1;
  std::string origin;  // "hostfile hf:3" or "-H entry 2", for messages
};

std::vector<Host> parse_hostfile(const std::string& path);
std::vector<Host> parse_host_list(const std::string& list);
int total_slots(const std::vector<Host>& hosts);
// "a:2,b:2" (the -H form mpirun takes).
std::string format_host_list(const std::vector<Host>& hosts);

}  // namespace lockstep
