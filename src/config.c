typedef int sp_stub_config;
