mod binding;
