/* Placeholder: replaced by its module.  */
typedef int sp_placeholder_audit;
