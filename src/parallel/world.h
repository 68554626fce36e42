// The processes of a data-parallel job, as the launcher that started them describes them:
//   torchrun (and torch.distributed.run):  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//                                          MASTER_ADDR, MASTER_PORT
//   Slurm's srun:                          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//                                          SLURM_NTASKS_PER_NODE (or SLURM_TASKS_PER_NODE), the
//                                          master from MASTER_ADDR or the first host of
//                                          SLURM_JOB_NODELIST
//   Open MPI's mpirun:                     OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                                          OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
// and none of them: a world of one. The first launcher whose variables are all there is taken,
// in the order above; variables of a launcher present only in part are an error.
#pragma once
#include <map>
#include <string>

namespace tt {

struct World {
  int rank = 0, size = 1;              // this process, and how many there are
  int local_rank = 0, local_size = 1;  // on this node (the GPU a process takes is its local rank)
  std::string launcher = "none";       // none, torchrun, built-in (tiny_llama --nproc-per-node), slurm, mpirun
  std::string master_addr;             // where rank 0 listens (torchrun, Slurm)
  int master_port = 0;
  bool distributed() const { return size > 1; }
};

// From the process's environment (`env`: variable -> value). UsageError, naming the variable,
// for a world that cannot be: a rank outside [0, size), a non-numeric value, a local size that
// does not divide the world.
World detect_world(const std::map<std::string, std::string>& env);
std::map<std::string, std::string> process_environment();

// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace tt
