typedef int sp_stub_repo_name;
